"""Faithful mode's vLLM platform rules (lib/contract/vllm/platform.cc) against
vLLM 0.33.0's own selection code (varlen.engines.vllm_platform runs it from
the wheel), on a grid of platforms, profiles, dtypes and head sizes:

* where vLLM's selection raises, faithful mode raises the same exception
  with the same message;
* where the layer would run another backend or another FlashAttention than
  the profile names, faithful mode does not predict the call: it says which
  runs instead;
* where the layer runs the profile, faithful mode never claims another runs
  (it may still say a kernel's door was read for another machine).

Skipped unless the vLLM wheel is in the wheels directory or named by
$VARLEN_VLLM_WHEEL.
"""

from __future__ import annotations

import itertools
import json

import pytest

pytest.importorskip("torch")
import varlen  # noqa: E402,F401  (the compiled core: faithful mode)
from varlen import _core  # noqa: E402
from varlen.engines import source  # noqa: E402
from varlen.engines import vllm as vllm_engine  # noqa: E402
from varlen.engines import vllm_platform  # noqa: E402

PLATFORMS = ["cuda:7.5", "cuda:8.0", "cuda:8.9", "cuda:9.0", "cuda:10.0", "cuda:10.3",
             "cuda:11.0", "cuda:12.0", "hip:9.4", "hip:11.0", "xpu", "cpu", "other"]
PROFILES = ["FLASH_ATTN/fa2", "FLASH_ATTN/fa3", "TRITON_ATTN", "TORCH_SDPA", "FLASHINFER"]
DTYPES = ["float16", "bfloat16", "float32"]
HEAD_SIZES = [64, 80, 256, 320]


@pytest.fixture(scope="module")
def selection() -> vllm_platform.VllmSelection:
    try:
        return vllm_platform.VllmSelection(vllm_engine.wheel_path(download=False))
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no vLLM {vllm_engine.VLLM_VERSION} wheel here: {why}")


def case(platform: str, profile: str, dtype: str, head_size: int) -> dict:
    device = "cpu" if platform == "cpu" else "cuda"
    return {
        "name": "vllm-platform-grid",
        "source": "vllm 0.33.0 platforms/*.py get_vit_attn_backend; fa_utils.get_flash_attn_version",
        "engine": "vllm", "vllm": vllm_engine.VLLM_VERSION, "mode": "faithful",
        "platform": platform,
        "geometry": {"seq_lens": [5, 3], "num_heads": 2, "head_dim": head_size, "dtype": dtype},
        "data": {"seed": 1},
        "call": {"profile": profile, "layout": "batched", "seq_len": 8,
                 "cu_seqlens": {"tensor": [0, 5, 8], "dtype": "int32", "device": device},
                 "kwargs": {"max_seqlen": {"tensor": [5], "dtype": "int32", "device": "cpu",
                                           "shape": []}}},
    }


def runs_the_profile(chosen, profile: str) -> bool:
    backend, _, version = profile.partition("/fa")
    return chosen[0] == backend and (not version or chosen[1] == int(version))


def test_faithful_modes_platform_rules_are_vllms(selection):
    seen = {"raises": 0, "instead": 0, "runs": 0}
    for platform, profile, dtype, head_size in itertools.product(PLATFORMS, PROFILES, DTYPES,
                                                                 HEAD_SIZES):
        where = f"{profile} on {platform}, {dtype}, head size {head_size}"
        predicted = _core.faithful_call(json.dumps(case(platform, profile, dtype, head_size)))
        assert "builder_error" not in predicted, (where, predicted)
        raised = predicted["raised"]
        try:
            chosen = selection.choice(vllm_platform.Platform.parse(platform), profile, dtype,
                                      head_size)
        except AssertionError as error:
            seen["raises"] += 1
            assert raised == ("AssertionError", str(error)), where
            continue
        if not runs_the_profile(chosen, profile):
            seen["instead"] += 1
            assert raised is not None and raised[0] == "Unimplemented", (where, chosen, raised)
            assert " instead " in raised[1], (where, chosen, raised)
            continue
        seen["runs"] += 1
        if raised is not None:
            assert " instead " not in raised[1], (where, chosen, raised)
            assert not raised[1].startswith("Backend AttentionBackendEnum."), (where, raised)
    # Every kind of answer occurs on the grid.
    assert min(seen.values()) > 20, seen


def test_the_wheels_selection_has_the_quirks_the_rules_name(selection):
    parse = vllm_platform.Platform.parse
    # XPU: float32 runs TRITON_ATTN before the override is looked at.
    assert selection.choice(parse("xpu"), "TORCH_SDPA", "float32", 64) == ("TRITON_ATTN", None)
    # Blackwell has no FA3: FA4 where the build supports it, else FA2.
    assert selection.choice(parse("cuda:10.0"), "FLASH_ATTN/fa3", "bfloat16", 64) == \
        ("FLASH_ATTN", 4)
    assert selection.choice(parse("cuda:12.0"), "FLASH_ATTN/fa3", "bfloat16", 64) == \
        ("FLASH_ATTN", 2)
    # Hopper upgrades FA3 to FA4 above head size 256.
    assert selection.choice(parse("cuda:9.0"), "FLASH_ATTN/fa3", "bfloat16", 320) == \
        ("FLASH_ATTN", 4)
    with pytest.raises(AssertionError, match=r"attentionSupported backends are: \["):
        selection.choice(parse("cpu"), "FLASH_ATTN/fa2", "bfloat16", 64)

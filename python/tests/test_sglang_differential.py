"""The SGLang differential's own machinery: the device stand-in's counts, and
that the differential finds a difference it must find (scripts/python-check
runs the differential itself)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
import varlen  # noqa: E402,F401  (the compiled core: generated calls, faithful mode)
from varlen import _core  # noqa: E402
from varlen.engines import ENGINES, compare, device, differential, engine_module  # noqa: E402
from varlen.engines import sglang as sd, source  # noqa: E402


def engine(version: str) -> sd.Engine:
    release = sd.RELEASES[version]
    try:
        return sd.Engine(release, sd.fetch_wheel(release))
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no SGLang {version} wheel here: {why}")


def counted(e: sd.Engine, body):
    with device.observing() as (ledger, _), e.device.Mode():
        body()
    return ledger


def run(version: str, calls: int, backends, seed: int) -> dict:
    try:
        judge = sd.judge(version)
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no SGLang {version} wheel here: {why}")
    return differential.run(sd, judge, calls, backends, seed, None, _core)


def test_every_engine_module_offers_the_driver_what_it_needs():
    for name in ENGINES:
        module = engine_module(name)
        assert module.NAME == name
        for attribute in ("TITLE", "PROFILES", "DEFAULT_VERSIONS", "DEFAULT_CALLS",
                          "RUN_FOR_REAL", "judge"):
            assert hasattr(module, attribute), (name, attribute)
        assert set(module.RUN_FOR_REAL) <= set(module.PROFILES)
        # The profiles are the case format's, so the core generates calls for them.
        assert _core.generate_calls(1, 1, module.PROFILES[0], module.DEFAULT_VERSIONS[0])
    with pytest.raises(ValueError, match="not one of"):
        engine_module("tgi")


def test_the_driver_refuses_what_it_cannot_run(capsys):
    with pytest.raises(SystemExit) as exit_:
        differential.main(["--engine=sglang", "--backends=fa5"])
    assert exit_.value.code == 2
    assert "'fa5' is not one of" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        differential.main([])  # no engine


def test_device_tensors_count_host_reads_and_copies():
    e = engine("0.5.23")
    cu = torch.tensor([0, 3, 8], dtype=torch.int32).as_subclass(e.device.DeviceTensor)
    host = torch.tensor([0, 3, 8], dtype=torch.int64)
    seen = {}

    def body():
        seen["device"] = cu.device.type
        seen["diff_on_device"] = e.device.is_device(cu[1:] - cu[:-1])
        seen["max"] = (cu[1:] - cu[:-1]).max().item()  # one sync
        moved = host.to(cu.device)  # one host-to-device copy
        seen["moved_on_device"] = e.device.is_device(moved)
        with pytest.raises(RuntimeError):
            cu.item()  # three elements: raises before reading, no sync
        seen["on_host"] = e.device.is_device(cu.cpu())  # one sync

    ledger = counted(e, body)
    assert seen == {"device": "cuda", "diff_on_device": True, "max": 5, "moved_on_device": True,
                    "on_host": False}
    assert len(ledger.host_syncs) == 2
    assert len(ledger.host_to_device_copies) == 1


def test_repeat_interleave_reads_device_repeats_twice():
    # ATen's repeat_interleave_common: cumsum[-1].item(), then the negative
    # check's (repeats >= 0).all().item(); none for no repeats or host ones.
    e = engine("0.5.23")
    grid = torch.tensor([[1, 4, 8], [2, 2, 2]]).as_subclass(e.device.DeviceTensor)
    seen = {}

    def body():
        frames = torch.repeat_interleave(grid[:, 1] * grid[:, 2], grid[:, 0])
        seen["frames"] = e.device.plain(frames).tolist()
        seen["on_device"] = e.device.is_device(frames)
        torch.repeat_interleave(torch.tensor([5]), torch.tensor([2]))  # host: no sync
        torch.repeat_interleave(grid[:0, 1], grid[:0, 0])  # no repeats: no sync
        with pytest.raises(RuntimeError, match="repeats can not be negative"):
            torch.repeat_interleave(grid[:, 1], -grid[:, 0])

    ledger = counted(e, body)
    assert seen == {"frames": [32, 4, 4], "on_device": True}
    assert len(ledger.host_syncs) == 4


def test_unique_consecutive_reads_its_length_and_tensor_copies_to_the_device():
    # ATen's CUDA unique_consecutive reads its output's length on the host
    # for a non-empty input; torch.tensor(host data, device=cuda) copies.
    e = engine("0.5.23")
    seen = {}

    def body():
        offsets = torch.tensor([0, 64, 96, 96, 96], device="cuda", dtype=torch.int32)
        seen["on_device"] = e.device.is_device(offsets)
        unique = torch.unique_consecutive(offsets)
        seen["unique"] = e.device.plain(unique).tolist()
        torch.unique_consecutive(offsets[:0])  # empty: no read
        torch.unique_consecutive(torch.tensor([1, 1]))  # host: no sync
        torch.tensor([1, 2])  # host: no copy

    ledger = counted(e, body)
    assert seen == {"on_device": True, "unique": [0, 64, 96]}
    assert len(ledger.host_syncs) == 1
    assert len(ledger.host_to_device_copies) == 1


def test_moves_copy_as_torch_does_and_views_keep_their_strides():
    e = engine("0.5.23")
    base = torch.zeros(6, dtype=torch.int32)
    base[::2] = torch.tensor([0, 3, 8], dtype=torch.int32)
    view = base[::2]  # a host cu_seqlens[::2]
    seen = {}

    def body():
        moved = view.to(torch.device("cuda"))  # a copy: non-dense arrives contiguous
        seen["moved"] = (e.device.is_device(moved), moved.is_contiguous(), moved.tolist())
        seen["same"] = (moved, moved.to(dtype=torch.int32))  # no change: no copy
        device_view = e.device.plain(torch.zeros(6, dtype=torch.int32)).as_subclass(e.device.DeviceTensor)[::2]
        seen["device_view"] = device_view.to(torch.device("cuda")).is_contiguous()

    counted(e, body)
    moved, same = seen.pop("same")
    assert e.device.plain(same).data_ptr() == e.device.plain(moved).data_ptr()
    assert seen == {"moved": (True, True, [0, 3, 8]), "device_view": False}
    # The host copy of a described view keeps it a view of a zero-filled base,
    # and the report names its step.
    copy = device.host_copy(view)
    assert copy.stride() == (2,) and copy.tolist() == [0, 3, 8]
    assert compare.tensor_json(copy, on_device=True) == {
        "tensor": [0, 3, 8], "dtype": "int32", "device": "cuda", "step": 2}
    assert "step" not in compare.tensor_json(copy.contiguous(), on_device=False)


def test_the_modelled_release_agrees():
    result = run("0.5.23", 12, list(sd.PROFILES), 7)
    assert all(row["differ"] == 0 for row in result["backends"].values()), result["rules"]
    assert sum(row["calls"] for row in result["backends"].values()) >= 9 * 10 * 3 // 4


def test_a_release_that_differs_is_listed_by_rule():
    # 0.5.18's VisionFlash4Attention has no list branch: the graph runner's
    # [cu_seqlens, max_seqlen] fails its tensor assertion there.
    result = run("0.5.18", 150, ["fa4"], 11)
    assert result["judged_as"] == "0.5.23"
    assert result["backends"]["fa4"]["differ"] > 0
    assert any("AssertionError: cu_seqlens must be a torch.Tensor" in rule
               for rule in result["rules"]), list(result["rules"])


def call_of(case: dict) -> dict:
    predicted = _core.faithful_call(json.dumps(case))
    assert "builder_error" not in predicted, predicted
    return predicted


def test_the_kernels_doors_are_strict():
    # A float32 q reaches fa3's and fa4's kernels unchanged: FA3's mha_fwd and
    # FA4's interface refuse it, on SGLang's side as in faithful mode's
    # prediction (no class counts a predicted refusal as agreement).
    e = engine("0.5.23")
    for profile, raised in (
            ("fa3", ("RuntimeError", "FlashAttention only supports fp16, bf16, and fp8_e4m3 "
                                     "data type")),
            ("fa4", ("AssertionError", "inputs must be float16, bfloat16, fp8 e4m3fn, or fp8 "
                                       "e5m2"))):
        case = {"name": f"{profile}-float32", "source": "test", "mode": "faithful",
                "sglang": "0.5.23",
                "geometry": {"seq_lens": [5, 3], "num_heads": 2, "head_dim": 16,
                             "dtype": "float32"},
                "data": {"seed": 1},
                "call": {"profile": profile,
                         "cu_seqlens": {"tensor": [0, 5, 8], "dtype": "int32",
                                        "device": "cuda"}}}
        predicted = call_of(case)
        assert predicted["raised"] is None  # resolution succeeds; the kernel refuses
        text = json.dumps(case)
        assert compare.kernel_prediction(_core, text) == raised
        assert e.call(predicted["call"]).raised == raised


def test_a_kernel_response_not_read_from_a_source_is_not_modelled():
    # A str softmax_scale reaches Triton's launcher, which specializes its
    # arguments before the grid: neither side claims to know what follows.
    e = engine("0.5.23")
    case = {"name": "triton-str-scale", "source": "test", "mode": "faithful", "sglang": "0.5.23",
            "geometry": {"seq_lens": [5, 3], "num_heads": 2, "head_dim": 16,
                         "dtype": "bfloat16"},
            "data": {"seed": 1},
            "call": {"profile": "triton_attn",
                     "cu_seqlens": {"tensor": [0, 5, 8], "dtype": "int32", "device": "cuda"},
                     "kwargs": {"softmax_scale": "0.25"}}}
    predicted = call_of(case)
    kernel = compare.kernel_prediction(_core, json.dumps(case))
    assert kernel is not None and kernel[0] == "Unimplemented", kernel
    assert e.call(predicted["call"]).raised[0] == "NotModelled"

"""varlen.record on SGLang's and vLLM's own classes (from their wheels, on
the CPU with varlen.engines' device stand-ins): generated calls, each made
live under a recorder; every recorded case must replay under faithful mode
to the outcome the live call had, and nearly every call must be recorded.

Skipped unless the wheels are in the wheels directory (scripts/python-env).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("torch")
import varlen  # noqa: E402
from varlen import _core  # noqa: E402
from varlen.engines import compare, source  # noqa: E402
from varlen.engines import sglang as sglang_engine  # noqa: E402
from varlen.engines import vllm as vllm_engine  # noqa: E402

CALLS = 40  # generated calls per profile


def outcome(raised):
    return "returned" if raised is None else raised


def replayed(path: Path):
    """faithful mode's outcome of a recorded case."""
    predicted = _core.faithful_call(str(path))  # its data files beside it
    if "builder_error" in predicted:
        return tuple(predicted["builder_error"])
    return None if predicted["raised"] is None else tuple(predicted["raised"])


def record_and_replay(recorder, engine, profiles, version, entry=None):
    """(made, recorded, agreed, disagreements): each generated call (of
    `entry` only, when given) made live under `recorder`, its case replayed. A call whose generated case faithful
    mode predicts differently from the live outcome (a difference the
    differential explains) is not held against the recording."""
    made = recorded = agreed = 0
    disagreements = []
    for profile in profiles:
        for text in _core.generate_calls(CALLS, 7, profile, version):
            if entry is not None and json.loads(text)["call"].get("entry", "direct") != entry:
                continue
            predicted = _core.faithful_call(text)
            if "builder_error" in predicted:
                continue
            before = len(recorder.written)
            live = engine.call(predicted["call"]).raised
            made += 1
            if len(recorder.written) == before:
                continue
            recorded += 1
            path = recorder.written[-1]
            case = json.loads(path.read_text())
            if (live is None) != ("expect" not in case):
                disagreements.append((path.name, "expect", live))
                continue
            want = predicted["raised"]
            if (want is None) != (live is None) or (live and not compare.same_error(want, live)):
                continue  # the generated case itself differs: not the recording's doing
            again = replayed(path)
            if (again is None and live is None) or (again and live and
                                                    compare.same_error(live, again)):
                agreed += 1
            else:
                disagreements.append((path.name, outcome(live), outcome(again)))
    return made, recorded, agreed, disagreements


def test_sglang_calls_replay_to_their_live_outcome(tmp_path):
    release = sglang_engine.RELEASES["0.5.23"]
    try:
        engine = sglang_engine.Engine(release, sglang_engine.fetch_wheel(release))
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no SGLang 0.5.23 wheel here: {why}")
    # With the live values saved (vLLM's test records without them).
    recorder = varlen.Recorder(tmp_path, limit=10_000, max_bytes=1 << 30, save_data=True)
    recorder.attach_sglang(engine.vision, version="0.5.23", graph_mode=sglang_engine._GRAPH_MODE.get)
    try:
        made, recorded, agreed, disagreements = record_and_replay(
            recorder, engine, list(sglang_engine.BACKEND_CLASSES), "0.5.23")
    finally:
        recorder.close()
    assert not disagreements, disagreements[:5]
    assert recorded >= 0.9 * made, (made, recorded, recorder.skipped[:10])
    assert agreed >= 0.5 * made, (made, agreed)
    # The hooks are gone once the recorder is closed.
    assert not hasattr(engine.vision.VisionFlash3Attention.forward, "__wrapped__")


def test_vllm_calls_replay_to_their_live_outcome(tmp_path):
    try:
        engine = vllm_engine.VllmEngine(vllm_engine.wheel_path(download=False))
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no vLLM wheel here: {why}")
    with varlen.record(tmp_path, limit=10_000, max_bytes=1 << 30) as recorder:
        recorder.attach_vllm(engine.code.layer, version=vllm_engine.VLLM_VERSION)
        made, recorded, agreed, disagreements = record_and_replay(
            recorder, engine, vllm_engine.PROFILES, vllm_engine.VLLM_VERSION)
    assert not disagreements, disagreements[:5]
    assert recorded >= 0.9 * made, (made, recorded, recorder.skipped[:10])
    assert agreed >= 0.5 * made, (made, agreed)


def test_only_errors_and_the_limits_bound_what_is_written(tmp_path):
    try:
        engine = vllm_engine.VllmEngine(vllm_engine.wheel_path(download=False))
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no vLLM wheel here: {why}")
    texts = _core.generate_calls(60, 3, "TORCH_SDPA", vllm_engine.VLLM_VERSION)

    def calls():  # a call's tensors are handed over once
        return [_core.faithful_call(t)["call"] for t in texts]

    with varlen.record(tmp_path / "errors", only_errors=True) as recorder:
        recorder.attach_vllm(engine.code.layer, version=vllm_engine.VLLM_VERSION)
        raised = sum(engine.call(d).raised is not None for d in calls())
    assert 0 < len(recorder.written) <= raised
    assert all("expect" in json.loads(p.read_text()) for p in recorder.written)
    with pytest.warns(UserWarning, match="stopped at the limit of 3 calls"):
        with varlen.record(tmp_path / "three", limit=3) as recorder:
            recorder.attach_vllm(engine.code.layer, version=vllm_engine.VLLM_VERSION)
            for d in calls():
                engine.call(d)
    assert len(recorder.written) == 3
    assert len(list((tmp_path / "three").glob("*.json"))) == 3
    assert "recording stopped at the limit of 3 calls" in \
        (tmp_path / "three" / "skipped.txt").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with varlen.record(tmp_path / "small", max_bytes=1) as recorder:
            recorder.attach_vllm(engine.code.layer, version=vllm_engine.VLLM_VERSION)
            engine.call(calls()[0])
    assert recorder.written == [] and recorder.full


def qkv_of(text_or_path: str):
    """q, k and v (torch tensors) of the call a case makes."""
    import torch
    call = _core.faithful_call(text_or_path)["call"]
    return [torch.from_dlpack(call[name]["__tensor__"]) for name in "qkv"]


@pytest.mark.parametrize("only_errors", [False, True])
def test_saved_values_replay_as_the_live_call_had_them(tmp_path, only_errors):
    """save_data: q, k and v beside each case, in every layout vLLM's layer
    takes (packed, batched, merged heads, the fused projection's views); the
    recorded case makes the live values, bit for bit (NaN and infinities
    too), and replays to the live outcome."""
    import numpy
    import torch
    try:
        engine = vllm_engine.VllmEngine(vllm_engine.wheel_path(download=False))
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no vLLM wheel here: {why}")
    checked, layouts = 0, set()
    with varlen.record(tmp_path, save_data=True, only_errors=only_errors, limit=10_000,
                       max_bytes=1 << 30) as recorder:
        recorder.attach_vllm(engine.code.layer, version=vllm_engine.VLLM_VERSION)
        for profile in vllm_engine.PROFILES:
            for text in _core.generate_calls(CALLS, 11, profile, vllm_engine.VLLM_VERSION):
                predicted = _core.faithful_call(text)
                if "builder_error" in predicted:
                    continue
                before = len(recorder.written)
                live = engine.call(predicted["call"]).raised
                if len(recorder.written) == before:
                    continue
                path = recorder.written[-1]
                case = json.loads(path.read_text())
                files = case["data"]["files"]
                assert set(files) == {"q", "k", "v"} and "seed" not in case["data"]
                assert "expect" in case or not only_errors
                for name, (saved, generated) in zip("qkv", zip(qkv_of(str(path)), qkv_of(text))):
                    assert saved.shape == generated.shape, (path.name, name)
                    assert torch.equal(saved.isnan(), generated.isnan()), (path.name, name)
                    assert torch.equal(saved.nan_to_num(0.0), generated.nan_to_num(0.0)), \
                        (path.name, name)
                    on_disk = numpy.load(tmp_path / files[name])
                    assert list(on_disk.shape) == list(generated.shape), (path.name, name)
                want = predicted["raised"]
                if (want is None) == (live is None) and (live is None or
                                                         compare.same_error(want, live)):
                    # Where faithful mode predicts the live call (the
                    # differential owns the rest), the recording replays to it.
                    again = replayed(path)
                    assert (again is None) == (live is None), (path.name, live, again)
                    assert live is None or compare.same_error(live, again), (path.name, again)
                checked += 1
                layouts.add((case["call"].get("layout", "packed"),
                             case["call"].get("merged_heads", False)))
    assert checked >= (5 if only_errors else 30), checked
    if not only_errors:
        assert {layout for layout, _ in layouts} == \
            {"packed", "fused_qkv", "batched", "batched_fused_qkv"}, layouts
        assert any(merged for _, merged in layouts), layouts


STUB_VISION = '''
import torch


class VisionSdpaAttention(torch.nn.Module):
    """A stand-in with SGLang's signature: it returns q."""

    def __init__(self):
        super().__init__()
        self.flatten_batch = False
        self.softmax_in_single_precision = False
        self.head_size = 8
        self.scale = 8 ** -0.5

    def forward(self, q, k, v, bsz, cu_seqlens=None, attention_mask=None, **kwargs):
        if cu_seqlens.dtype != torch.int32:
            raise RuntimeError("stand-in: int32 only")
        return q
'''


def test_a_server_records_through_the_environment(tmp_path):
    """python -m varlen record DIR -- COMMAND: every Python process the
    command starts records, the engine module hooked when it is imported."""
    import subprocess
    import sys
    package = tmp_path / "site" / "sglang" / "srt" / "layers" / "attention"
    package.mkdir(parents=True)
    for level in range(4):
        (package.parents[level] / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "vision.py").write_text(STUB_VISION)
    program = (
        f"import sys; sys.path.insert(0, {str(tmp_path / 'site')!r}); import torch\n"
        "from sglang.srt.layers.attention import vision\n"
        "b = vision.VisionSdpaAttention(); q = torch.zeros(8, 2, 8, dtype=torch.bfloat16)\n"
        "b.forward(q, q, q, bsz=1, seq_len=8, cu_seqlens=torch.tensor([0, 3, 8], dtype=torch.int32))\n"
        "try:\n"
        "    b.forward(q, q, q, bsz=1, seq_len=8, cu_seqlens=torch.tensor([0, 3, 8]))\n"
        "except RuntimeError:\n"
        "    pass\n")
    out = tmp_path / "recorded"
    done = subprocess.run([sys.executable, "-m", "varlen", "record", str(out), "--limit", "5",
                           "--", sys.executable, "-c", program],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    cases = sorted(out.glob("*.json"))
    assert len(cases) == 2, (list(out.iterdir()), done.stderr)
    first, second = (json.loads(p.read_text()) for p in cases)
    assert first["call"]["profile"] == "sdpa" and first["geometry"]["seq_lens"] == [3, 5]
    assert first["call"]["cu_seqlens"] == {"tensor": [0, 3, 8], "dtype": "int32",
                                           "device": "cpu"}
    assert "expect" not in first
    assert second["expect"] == {"outcome": "error", "error": "RuntimeError",
                                "message": "stand-in: int32 only"}
    assert second["call"]["cu_seqlens"]["dtype"] == "int64"


@pytest.mark.parametrize("band", ["4.57.6", "5.25.0"])
def test_transformers_calls_replay_to_their_live_outcome(tmp_path, band):
    from varlen.engines import transformers as transformers_engine
    try:
        judge = transformers_engine.judge(band)
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no transformers {band} wheel here: {why}")
    engine = judge.engine
    functions = transformers_engine.load(engine.band).functions
    # eager is a model's own function; 4.57.6 registers no flash_attention_4.
    profiles = [p for p in transformers_engine.PROFILES if p != "eager" and p in functions]
    with varlen.record(tmp_path, limit=10_000, max_bytes=1 << 30, save_data=True) as recorder:
        recorder.attach_transformers(functions, version=band)
        made, recorded, agreed, disagreements = record_and_replay(recorder, engine, profiles, band,
                                                            entry="direct")
    assert not disagreements, disagreements[:5]
    assert recorded >= 0.9 * made, (made, recorded, recorder.skipped[:10])
    assert agreed >= 0.5 * made, (made, agreed)

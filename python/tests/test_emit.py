"""`python -m varlen repro CASE --emit-python` on the corpus: each emitted
script, run against SGLang's, vLLM's and transformers' own code (their
wheels, on the CPU
with varlen.engines' device stand-ins in place of a GPU), must make the
case's call: it raises what the engine raises for the case's call, or
returns where that call returns.

Skipped unless the wheels are in the wheels directory (scripts/python-env).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
import varlen  # noqa: E402,F401
from varlen import _core, emit  # noqa: E402
from varlen.engines import compare, device, source  # noqa: E402
from varlen.engines import sglang as sglang_engine  # noqa: E402
from varlen.engines import vllm as vllm_engine  # noqa: E402

CORPUS = Path(_core.source_corpus_dir())


def engines():
    found = {}
    try:
        release = sglang_engine.RELEASES["0.5.23"]
        found["sglang"] = sglang_engine.Engine(release, sglang_engine.fetch_wheel(release))
    except (source.Unavailable, OSError):
        pass
    try:
        found["vllm"] = vllm_engine.VllmEngine(vllm_engine.wheel_path(download=False))
    except (source.Unavailable, OSError):
        pass
    return found


def elements(case: dict) -> int:
    g = case["geometry"]
    padding = g.get("padding", 0)
    rows = sum(g["seq_lens"]) + (sum(padding) if isinstance(padding, list) else padding)
    return rows * g["num_heads"] * g["head_dim"]


def run_script(engine, text: str, case_text: str, script_globals=None):
    """The emitted script's outcome, run under the engine's stand-ins
    (`script_globals`: the script's module namespace, left as it ran)."""
    d = _core.faithful_call(case_text)["call"]
    out = io.StringIO()
    namespace = {"__name__": "__main__"} if script_globals is None else script_globals
    # Each call (a warmup's, the case's: the script's try statements) is one
    # forward of its own to the stand-ins' kernel capture.
    with engine.calling(d), contextlib.redirect_stdout(out):
        for statement in ast.parse(text).body:
            code = compile(ast.Module([statement], type_ignores=[]), "<emitted>", "exec")
            with device.observing() if isinstance(statement, ast.Try) else \
                    contextlib.nullcontext():
                exec(code, namespace)
    return emit.script_outcome(out.getvalue()), out.getvalue()


def check(engine, paths):
    """(scripts run, cases not emitted, mismatches) of `paths` on `engine`."""
    ran, not_emitted, mismatches = 0, [], []
    for path in paths:
        case_text = path.read_text()
        try:
            script = emit.python_script(case_text)
        except emit.NotEmitted as why:
            not_emitted.append((path.name, str(why)))
            continue
        live = engine.call(_core.faithful_call(case_text)["call"]).raised
        seen, printed = run_script(engine, script, case_text)
        ran += 1
        if (live is None) != (seen is None) or (live and not compare.same_error(live, seen)):
            mismatches.append((path.name, live, printed[:300]))
    return ran, not_emitted, mismatches


def corpus_cases(engine_name: str):
    """The corpus cases of an engine that run here: no platform (the stand-ins
    are one GPU's) and small enough to make twice."""
    for path in sorted(CORPUS.glob("*.json")):
        case = json.loads(path.read_text())
        if case.get("engine", "sglang") == engine_name and "platform" not in case and \
                elements(case) <= 1 << 22:
            yield path, case


def test_emitted_scripts_make_the_cases_call():
    found = engines()
    if set(found) != {"sglang", "vllm"}:
        pytest.skip("the SGLang 0.5.23 and vLLM wheels are not both here")
    ran, not_emitted, mismatches = 0, [], []
    for name, engine in found.items():
        r, n, m = check(engine, [path for path, _ in corpus_cases(name)])
        ran, not_emitted, mismatches = ran + r, not_emitted + n, mismatches + m
    assert not mismatches, mismatches[:5]
    assert ran >= 300, (ran, not_emitted[:5])


def test_emitted_transformers_scripts_make_the_cases_call():
    from varlen.engines import transformers as transformers_engine
    by_band = {}
    for path, case in corpus_cases("transformers"):
        by_band.setdefault(case.get("transformers", "5.25.0"), []).append(path)
    ran, mismatches = 0, []
    for band, paths in sorted(by_band.items()):
        try:
            engine = transformers_engine.judge(band).engine
        except (source.Unavailable, OSError) as why:
            pytest.skip(f"no transformers {band} wheel here: {why}")
        r, _, m = check(engine, paths)
        ran, mismatches = ran + r, mismatches + m
    assert not mismatches, mismatches[:5]
    assert ran >= 40, ran


def test_the_command_writes_a_script_that_names_the_engine_and_the_prediction(tmp_path):
    case = CORPUS / "flashinfer-seed-missing-sequence-lengths.json"
    done = subprocess.run([sys.executable, "-m", "varlen", "repro", str(case), "--emit-python"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    script = done.stdout
    assert "from sglang.srt.layers.attention.vision import VisionFlashInferAttention" in script
    assert 'pip install "sglang==0.5.23"' in script
    assert ("varlen's faithful mode predicts: raised RuntimeError: sequence_lengths should be "
            "prepared for vision flashinfer_cudnn attention backend") in script
    compile(script, "emitted", "exec")
    folder = subprocess.run([sys.executable, "-m", "varlen", "repro", str(CORPUS),
                             "--emit-python"], capture_output=True, text=True, timeout=120)
    assert folder.returncode == 2 and "one case file" in folder.stderr


def test_a_returned_output_is_compared_with_each_sequences_attention():
    """SGLang's VisionSdpaAttention runs torch for real on the stand-ins: the
    script's reference line tells its silent corruption from a right output."""
    engine = engines().get("sglang")
    if engine is None:
        pytest.skip("no SGLang 0.5.23 wheel here")

    def difference(name: str) -> float:
        case_text = (CORPUS / name).read_text()
        _, printed = run_script(engine, emit.python_script(case_text), case_text)
        line = printed.splitlines()[1]
        assert line.startswith("largest difference from each sequence's own attention"), printed
        return float(line.split(": ")[1].split()[0])

    assert difference("sdpa-block-diagonal.json") < 0.02
    assert difference("sdpa-ignores-per-call-softmax-scale.json") > 0.5
    assert difference("sdpa-padding-partial-item.json") > 0.5


def test_a_case_with_its_values_in_files_emits_a_script_that_loads_them(tmp_path):
    """A case whose data names .npy files (a recording with save_data): the
    script loads q, k and v from the files beside it, and its call computes
    on exactly those values."""
    import numpy
    import torch
    engine = engines().get("sglang")
    if engine is None:
        pytest.skip("no SGLang 0.5.23 wheel here")
    case = json.loads((CORPUS / "sdpa-block-diagonal.json").read_text())
    call = _core.faithful_call(json.dumps(case))["call"]
    for name in "qkv":
        values = torch.from_dlpack(call[name]["__tensor__"]).float() * 0.5
        numpy.save(tmp_path / f"block.{name}.npy", values.numpy())
    case["data"] = {"files": {name: f"block.{name}.npy" for name in "qkv"}}
    path = tmp_path / "block.json"
    path.write_text(json.dumps(case))
    with pytest.raises(emit.NotEmitted, match="emit it from its file"):
        emit.python_script(path.read_text())
    script = emit.python_script(path.read_text(), path=path)
    assert "q = load_values('block.q.npy', torch.bfloat16)" in script
    assert "put block.q.npy, block.k.npy, block.v.npy beside this script" in script
    namespace = {"__name__": "__main__", "__file__": str(tmp_path / "script.py")}
    seen, printed = run_script(engine, script, str(path), namespace)
    assert seen is None, printed
    for name in "qkv":
        want = torch.from_numpy(numpy.load(tmp_path / f"block.{name}.npy"))
        assert torch.equal(namespace[name].float().cpu(), want), name
    line = printed.splitlines()[1]
    assert line.startswith("largest difference from each sequence's own attention"), printed
    assert float(line.split(": ")[1].split()[0]) < 0.02, printed
    cli = subprocess.run([sys.executable, "-m", "varlen", "repro", str(path), "--emit-python"],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and "load_values('block.v.npy'" in cli.stdout, cli.stderr


def test_warmup_calls_come_first_on_the_same_backend_object():
    """A case with warmups (a cache keyed on too few fields): the script
    makes each warmup call first, on the backend object the case's call uses,
    and prints its outcome on a line of its own."""
    engine = engines().get("sglang")
    if engine is None:
        pytest.skip("no SGLang 0.5.23 wheel here")
    case_text = (CORPUS / "cudnn-graph-cache-stale-scale-4014.json").read_text()
    script = emit.python_script(case_text)
    assert script.count("backend = VisionFlashInferAttention(") == 1, script
    assert script.index("# Warmup call 1") < script.index("# The case's call.")
    assert "softmax_scale=0.5)" in script and "softmax_scale=0.25)" in script
    seen, printed = run_script(engine, script, case_text)
    assert printed.splitlines()[0] == "warmup call 1 returned", printed
    assert seen is None and emit.script_outcome("warmup call 1 raised X: y\nreturned: z") is None

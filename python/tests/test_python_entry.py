"""Tests of the Python entry: tensors crossing into Python backends, both
kinds of registration, the harness's judgement of call-level backends, and
a broken backend's failure replayed by `python -m varlen repro` and by the
pytest plugin.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

import varlen
from varlen import spec

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = varlen.default_corpus_dir()


def _env():
    env = dict(os.environ)
    # The directory of the varlen this process loaded goes first: another test module
    # may have put the source tree (without the compiled core) on sys.path.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(varlen.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([HERE, package_parent] + sys.path)
    return env


seen = []


def _recording_kernel(q, k, v, o, cu_q, cu_k, max_q, max_k, scale):
    seen.append(dict(q=q, k=k, v=v, o=o, cu=cu_q.clone(), max_q=max_q, scale=scale,
                     q_stride=q.stride(), q_ptr=q.data_ptr()))
    for start, end in zip(cu_q.tolist(), cu_q.tolist()[1:]):
        if end > start:
            group = q.shape[1] // k.shape[1]
            out = torch.nn.functional.scaled_dot_product_attention(
                q[start:end].transpose(0, 1).float(),
                k[start:end].transpose(0, 1).float().repeat_interleave(group, 0),
                v[start:end].transpose(0, 1).float().repeat_interleave(group, 0), scale=scale)
            o[start:end].copy_(out.transpose(0, 1))


RECORDER = varlen.register(spec.KernelBackend(
    name="test_recording_kernel", fn=_recording_kernel,
    capabilities=spec.Capabilities(dtypes=("float32", "bfloat16"), max_head_dim=128)))


def _case(name):
    return os.path.join(CORPUS, name + ".json")


def test_kernel_level_tensors_are_views_with_their_dtype_and_strides():
    seen.clear()
    [outcome] = varlen.repro(_case("fa3-direct-fused-qkv-views-hardened"), "test_recording_kernel")
    assert outcome.verdict == "PASS", outcome.text
    call = seen[-1]
    # Column views of one fused projection keep their strides: no copy.
    assert call["q"].dtype == torch.bfloat16
    assert call["q"].stride()[0] > call["q"].shape[1] * call["q"].shape[2]
    assert call["q"].stride()[2] == 1
    assert call["cu"].dtype == torch.int32
    assert isinstance(call["max_q"], int) and isinstance(call["scale"], float)


def test_load_case_and_reference_come_from_the_harness():
    case = varlen.load_case(_case("fa3-cu-int32"))
    assert case.name == "fa3-cu-int32"
    assert case.q.shape == (120, 4, 64) and case.q.dtype == torch.bfloat16
    ref = varlen.reference(case)
    assert ref.shape == (120, 4, 64) and ref.dtype == torch.float64
    assert torch.isfinite(ref).all()
    assert json.loads(case.json)["name"] == "fa3-cu-int32"


def test_a_returned_output_of_the_wrong_shape_or_dtype_fails_naming_it():
    def wrong_shape(q, k, v, o, *args):
        return torch.zeros(o.shape[0], o.shape[1], o.shape[2] + 1, dtype=o.dtype)

    def wrong_dtype(q, k, v, o, *args):
        return torch.zeros(o.shape, dtype=torch.float32)

    for name, fn, says in (("test_wrong_shape", wrong_shape, "([tokens, heads, head_dim_v])"),
                           ("test_wrong_dtype", wrong_dtype,
                            "returned torch.float32; the output is torch.bfloat16")):
        varlen.register(spec.KernelBackend(name=name, fn=fn,
                                           capabilities=spec.Capabilities(dtypes=("bfloat16",))))
        [outcome] = varlen.repro(_case("fa3-cu-int32"), name)
        assert outcome.verdict == "FAIL"
        assert f"{name} raised ValueError" in outcome.text
        assert says in outcome.text


def test_registration_errors_name_the_problem():
    with pytest.raises(ValueError, match="already registered"):
        varlen.register(spec.KernelBackend(name="test_recording_kernel", fn=_recording_kernel))
    assert varlen.register(RECORDER) is RECORDER  # the same object again: nothing happens
    with pytest.raises(ValueError, match="Capabilities.dtypes: 'int8'"):
        spec.Capabilities(dtypes=("int8",))
    with pytest.raises(ValueError, match="names no backend|cannot import"):
        varlen.load_backend("no_such_module_anywhere:BACKENDS")


def test_a_call_level_backend_is_judged_against_faithful_mode():
    import broken_backends

    varlen.register(broken_backends.BACKENDS[0], origin="broken_backends:BACKENDS")
    # A predicted error must be raised with the same type and message: this
    # backend raises nothing of SGLang's, so a case SGLang refuses fails.
    [refused] = varlen.repro(_case("triton-graph-mode-output-ws-missing"),
                             "broken_max_seqlen_tensor")
    assert refused.verdict == "FAIL", refused.text
    assert "faithful mode predicts RuntimeError" in refused.text
    # A correct call with an int max_seqlen is right.
    [right] = varlen.repro(_case("triton-builder-metadata-no-host-sync"),
                           "broken_max_seqlen_tensor")
    assert right.verdict == "PASS", right.text
    assert "predicted:  the ground truth's launch" in right.text
    # Hardened cases are not an engine's.
    [hardened] = varlen.repro(_case("triton-graph-mode-layer-output-ws-none-hardened"),
                              "broken_max_seqlen_tensor")
    assert hardened.verdict == "UNSUPPORTED"


def test_a_broken_call_level_backend_gives_a_case_that_repro_and_pytest_replay(tmp_path):
    import broken_backends

    varlen.register(broken_backends.BACKENDS[0], origin="broken_backends:BACKENDS")
    failures = tmp_path / "failures"
    result = varlen.run_property("ArgumentForms", "broken_max_seqlen_tensor",
                                 failures_dir=str(failures))
    assert not result["passed"]
    assert "max_seqlen as a" in result["why"] and "tensor" in result["why"]
    shrunk = result["shrunk"]
    case = json.loads(open(shrunk).read())
    assert max(case["geometry"]["seq_lens"]) > broken_backends.ASSUMED_MAX
    assert "The shrunk failing case." == case["description"]
    assert result["reproduce"].endswith(
        f"repro {shrunk} --load=broken_backends:BACKENDS --backend=broken_max_seqlen_tensor")

    repro = subprocess.run(
        [sys.executable, "-m", "varlen", "repro", shrunk, "--load=broken_backends:BACKENDS",
         "--backend=broken_max_seqlen_tensor"],
        capture_output=True, text=True, env=_env(), timeout=600)
    assert repro.returncode == 1, repro.stdout + repro.stderr
    assert "verdict:    FAIL" in repro.stdout
    assert "whose output matches the reference; forward's does not" in repro.stdout

    plugin = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "varlen.pytest_plugin", "-q", "-p",
         "no:cacheprovider", "--varlen-backend=broken_backends:BACKENDS", "--varlen-no-corpus",
         f"--varlen-failures={tmp_path / 'plugin'}", "-k", "ArgumentForms", str(tmp_path)],
        capture_output=True, text=True, env=_env(), timeout=600, cwd=str(tmp_path))
    assert plugin.returncode == 1, plugin.stdout + plugin.stderr
    assert "varlen/broken_max_seqlen_tensor/Conformance.ArgumentForms" in plugin.stdout
    replayed = tmp_path / "plugin" / "broken_max_seqlen_tensor-ArgumentForms.json"
    assert f"replay: {sys.executable} -m varlen repro {replayed}" in plugin.stdout
    assert json.loads(replayed.read_text())["geometry"] == case["geometry"]


def test_a_backend_in_vllms_convention_is_called_and_judged_as_vllm_calls_it(tmp_path):
    import vllm_convention_backends

    for backend in vllm_convention_backends.BACKENDS:
        varlen.register(backend, origin="vllm_convention_backends:BACKENDS")
    case = _case("vllm-sdpa-ignores-max-seqlen")
    [right] = varlen.repro(case, "split_sdpa_encoder_attention")
    assert right.verdict == "PASS", right.text
    # One image attending to its neighbour: vLLM's prediction is the ground
    # truth's launch, and this output is not.
    [wrong] = varlen.repro(case, "cross_image_encoder_attention")
    assert wrong.verdict == "FAIL", wrong.text
    assert "whose output matches the reference; forward's does not" in wrong.text
    # vLLM's binding refuses SGLang's keywords by its own qualified name;
    # the plugin's class raises the same refusal under its own.
    [refused] = varlen.repro(_case("vllm-softmax-scale-keyword-type-error"),
                             "split_sdpa_encoder_attention")
    assert refused.verdict == "PASS", refused.text
    assert "SplitSdpaEncoderAttention.forward() got an unexpected keyword" in refused.text
    result = varlen.run_property("Numerics", "cross_image_encoder_attention",
                                 failures_dir=str(tmp_path))
    assert not result["passed"], result
    checked = varlen.check("cross_image_encoder_attention", tier="smoke", progress=False)
    assert not checked.passed
    assert ("property", "Numerics", "FAIL") in {(i["kind"], i["name"], i["status"])
                                                for i in checked.items}, checked.text
    plugin = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "varlen.pytest_plugin", "-q", "-p",
         "no:cacheprovider", "--varlen-load=vllm_convention_backends:BACKENDS",
         "--varlen-backend=cross_image_encoder_attention", "--varlen-no-corpus",
         f"--varlen-failures={tmp_path / 'plugin'}", "-k", "Numerics", str(tmp_path)],
        capture_output=True, text=True, env=_env(), timeout=600, cwd=str(tmp_path))
    assert plugin.returncode == 1, plugin.stdout + plugin.stderr
    assert "varlen/cross_image_encoder_attention/Conformance.Numerics" in plugin.stdout


def test_an_attention_function_in_transformers_convention_is_called_as_each_band_calls_it(
        tmp_path):
    import transformers_convention_backends

    for backend in transformers_convention_backends.BACKENDS:
        varlen.register(backend, origin="transformers_convention_backends:BACKENDS")
    # 5.14.1's layer: one call over the pack, max_length_q a 0-d tensor.
    case = _case("transformers-5.14-fa2-tensor-max-reaches-kernel")
    [right] = varlen.repro(case, "varlen_flash_function")
    assert right.verdict == "PASS", right.text
    assert "1 call of the function whose arguments say the ground truth" in right.text
    [refused] = varlen.repro(case, "int_max_only_function_5_14")
    assert refused.verdict == "FAIL", refused.text
    assert "forward raised TypeError: max_length_q must be an int, got Tensor" in refused.text
    # 5.25.0's layer hands the same function an int.
    [later] = varlen.repro(case, "int_max_only_function_5_25")
    assert later.verdict == "PASS", later.text
    # The split path: one call per image, the empty one included.
    [split] = varlen.repro(_case("transformers-5.14-sdpa-empty-segment-ok"),
                           "varlen_split_function")
    assert split.verdict == "PASS", split.text
    assert "4 calls of the function" in split.text
    # Where transformers raises before calling the function, nothing of it is judged.
    [before] = varlen.repro(_case("transformers-split-sizes-read-once-before-refusal"),
                            "varlen_split_function")
    assert before.verdict == "UNSUPPORTED", before.text
    assert "raises before it calls the function" in before.text
    result = varlen.run_property("Numerics", "cross_image_function", failures_dir=str(tmp_path))
    assert not result["passed"], result
    checked = varlen.check("varlen_split_function", tier="smoke", progress=False)
    assert checked.passed, checked.text
    plugin = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "varlen.pytest_plugin", "-q", "-p",
         "no:cacheprovider", "--varlen-load=transformers_convention_backends:BACKENDS",
         "--varlen-backend=cross_image_function", "--varlen-no-corpus",
         f"--varlen-failures={tmp_path / 'plugin'}", "-k", "Numerics", str(tmp_path)],
        capture_output=True, text=True, env=_env(), timeout=600, cwd=str(tmp_path))
    assert plugin.returncode == 1, plugin.stdout + plugin.stderr
    assert "varlen/cross_image_function/Conformance.Numerics" in plugin.stdout


def test_transformers_functions_name_their_registration_and_band():
    assert spec.transformers_profile("flash_attention_3") == "flash_attention_3"
    assert spec.transformers_profile("my_flash_varlen") == "kernels-community/flash-attn2"
    assert spec.transformers_profile("my_attention") == "sdpa"
    assert [spec.transformers_band(v) for v in ("4.57.1", "5.3.0", "5.14.1", "5.15.0", "5.24.0")] \
        == ["4.57.6", "5.14.1", "5.14.1", "5.25.0", "5.25.0"]
    with pytest.raises(ValueError, match="older than 4.53.1"):
        spec.transformers_band("4.52.0")
    with pytest.raises(ValueError, match="other than 'eager'"):
        spec.CallBackend(name="x", make=object, profile="eager", engine="transformers")
    backend = spec.CallBackend(name="x", make=object, profile="my_flash", engine="transformers",
                               version="5.24.0")
    assert (backend.modelled_profile, backend.modelled_version) == \
        ("transformers:kernels-community/flash-attn2", "5.25.0")


def test_call_backends_name_a_profile_of_their_engine():
    from varlen import _core

    assert {e: tuple(p) for e, p in _core.engine_profiles().items()} == spec.ENGINE_PROFILES
    with pytest.raises(ValueError, match="'TORCH_SDPA' is not one of sglang's"):
        spec.CallBackend(name="x", make=object, profile="TORCH_SDPA")
    with pytest.raises(ValueError, match="CallBackend.engine: 'tgi'"):
        spec.CallBackend(name="x", make=object, profile="sdpa", engine="tgi")

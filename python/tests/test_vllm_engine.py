"""vLLM's MMEncoderAttention as varlen.engines.vllm runs it: hand-built calls,
checked against what vLLM 0.33.0's code does with them (the kernel shim's
arguments, the host syncs, the exact exceptions), without varlen's compiled
core.

    build/python-env/bin/python -m pytest python/tests/test_vllm_engine.py

The wheel is not downloaded here: the tests are skipped unless it is in the
wheels directory (varlen.engines.source.wheels_dir()) or $VARLEN_VLLM_WHEEL
names it (`python -m varlen.engines.vllm --probe` downloads it).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
pytest.importorskip("einops")

PYTHON_DIR = Path(__file__).resolve().parents[1]
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))
try:
    import varlen  # noqa: F401
except ImportError:
    # The package's __init__ needs the compiled core; these modules do not.
    _package = types.ModuleType("varlen")
    _package.__path__ = [str(PYTHON_DIR / "varlen")]
    sys.modules["varlen"] = _package

from varlen.engines import source  # noqa: E402
from varlen.engines import vllm as ve  # noqa: E402

S, H, D = 10, 2, 8


@pytest.fixture(scope="module")
def engine() -> ve.VllmEngine:
    try:
        return ve.VllmEngine(ve.wheel_path(download=False))
    except (source.Unavailable, OSError) as why:
        pytest.skip(f"no vLLM {ve.VLLM_VERSION} wheel here: {why}")


def tensor(values, dtype="int32", device="cuda", ident=3):
    return {"__tensor__": np.asarray(values, dtype=dtype), "device": device, "id": ident}


def qkv(shape=(1, S, H, D), seed=0, dtype="float16"):
    """float16 by default: FlashAttention's door takes fp16 and bf16 only."""
    rng = np.random.default_rng(seed)
    return [tensor(rng.standard_normal(shape), dtype, ident=i) for i in range(3)]


def call(profile, cu=None, inputs=None, layer=None, forward_metadata=None, **kwargs) -> dict:
    q, k, v = inputs or qkv()
    return {"profile": profile, "q": q, "k": k, "v": v, "cu_seqlens": cu, "kwargs": kwargs,
            "forward_metadata": forward_metadata,
            "vllm_layer": layer or {"num_heads": H, "head_size": D, "num_kv_heads": H,
                                    "scale": None}}


CU = tensor([0, 4, S])
CPU_MAX = tensor(6, device="cpu", ident=4)


def test_flash_attn_reads_a_host_max_without_a_sync(engine):
    seen = engine.call(call("FLASH_ATTN/fa2", CU, max_seqlen=CPU_MAX))
    assert seen.raised is None
    a = seen.capture.args
    assert seen.capture.kernel == "flash_attn_varlen_func"
    assert type(a["max_seqlen_q"]) is int and a["max_seqlen_q"] == 6
    assert a["max_seqlen_k"] == 6
    assert a["fa_version"] == 2
    assert a["cu_seqlens_q"] is a["cu_seqlens_k"]
    assert engine.device.is_device(a["cu_seqlens_q"])
    assert engine.device.plain(a["cu_seqlens_q"]).tolist() == [0, 4, S]
    # The layer's 1.0 / head_size**0.5, not head_size**-0.5 (one ulp apart at 8).
    assert a["softmax_scale"] == 1.0 / D ** 0.5 != D ** -0.5
    assert a["causal"] is False and a["dropout_p"] == 0.0
    assert tuple(a["q"].shape) == (S, H, D) and tuple(a["out"].shape) == (S, H, D)
    assert tuple(seen.output.shape) == (1, S, H, D)
    assert seen.ledger.host_syncs == [] and seen.ledger.host_to_device_copies == []


def test_flash_attn_fa3_and_a_device_max_cost_one_sync(engine):
    seen = engine.call(call("FLASH_ATTN/fa3", CU, max_seqlen=tensor(6, ident=4)))
    assert seen.raised is None
    assert seen.capture.args["fa_version"] == 3
    assert seen.capture.args["max_seqlen_q"] == 6
    assert len(seen.ledger.host_syncs) == 1


def test_no_cu_seqlens_makes_uniform_offsets_on_the_device(engine):
    seen = engine.call(call("FLASH_ATTN/fa2"))
    assert seen.raised is None
    cu = seen.capture.args["cu_seqlens_q"]
    assert engine.device.is_device(cu)  # torch.arange(..., device=q.device)
    assert cu.dtype == torch.int32 and engine.device.plain(cu).tolist() == [0, S]
    assert seen.capture.args["max_seqlen_q"] == S
    assert seen.ledger.host_syncs == []


def test_an_int_max_is_refused_by_the_dispatcher(engine):
    seen = engine.call(call("FLASH_ATTN/fa2", CU, max_seqlen=6))
    assert seen.raised is not None and seen.raised[0] == "RuntimeError"
    assert seen.raised[1].startswith(
        "vllm::flash_attn_maxseqlen_wrapper() Expected a value of type 'Optional[Tensor]' for "
        "argument 'max_seqlen' but instead found type 'int'.\nPosition: 8\nValue: 6\n"
        "Declaration: vllm::flash_attn_maxseqlen_wrapper(Tensor q, ")
    assert seen.raised[1].endswith("\nCast error details: Unable to cast 6 to Tensor")
    assert seen.capture.kernel is None


def test_a_thd_input_is_misread_as_batch_and_length(engine):
    t = 6
    seen = engine.call(call("FLASH_ATTN/fa2", inputs=qkv((t, H, D))))
    assert seen.raised == ("RuntimeError",
                           f"shape '[{t}, {H}, {H}, {D}]' is invalid for input of size {t * H * D}")


def test_cu_without_max_fails_the_both_or_neither_assertion(engine):
    for profile in ("FLASH_ATTN/fa2", "TRITON_ATTN"):
        seen = engine.call(call(profile, CU))
        assert seen.raised == ("AssertionError",
                               "cu_seqlens and max_seqlen should be both set or both None.")


def test_triton_hands_the_kernel_starts_and_lengths(engine):
    seen = engine.call(call("TRITON_ATTN", CU, max_seqlen=CPU_MAX))
    assert seen.raised is None and seen.capture.kernel == "context_attention_fwd"
    a, plain = seen.capture.args, engine.device.plain
    assert plain(a["b_start_loc"]).tolist() == [0, 4]
    assert plain(a["b_seq_len"]).tolist() == [4, 6]
    assert a["max_input_len"] == 6 and a["is_causal"] is False
    assert a["softmax_scale"] == 1.0 / D ** 0.5
    assert seen.ledger.host_syncs == []


def test_the_kernels_doors_refuse_what_the_kernels_refuse(engine):
    # FlashAttention's entry (mha_varlen_fwd) through the wheel's interface
    # and the op's real schema; Triton's launcher through the wheel's
    # context_attention_fwd.
    seen = engine.call(call("FLASH_ATTN/fa2", CU, inputs=qkv(dtype="float32"), max_seqlen=CPU_MAX))
    assert seen.raised == ("RuntimeError", "FlashAttention only support fp16 and bf16 data type")
    seen = engine.call(call("FLASH_ATTN/fa3", tensor([0, 4, S], dtype="int64"), max_seqlen=CPU_MAX))
    assert seen.raised == ("RuntimeError", "cu_seqlens_q must have dtype torch.int32")
    seen = engine.call(call("TRITON_ATTN", CU, max_seqlen=tensor(6.0, "float32", "cpu", ident=4)))
    assert seen.raised == ("TypeError", "'float' object cannot be interpreted as an integer")
    seen = engine.call(call("TRITON_ATTN", tensor([0, 4, S], device="cpu"), max_seqlen=CPU_MAX))
    assert seen.raised == ("ValueError",
                           "Pointer argument cannot be accessed from Triton (cpu tensor?)")
    # An empty host tensor's data_ptr() is 0: a valid null pointer.
    seen = engine.call(call("TRITON_ATTN", tensor([0], device="cpu"), max_seqlen=CPU_MAX))
    assert seen.raised is None


def test_sdpa_runs_padded_segments_and_matches_a_per_segment_reference(engine):
    cu = [0, 4, 10, 10, 10]
    inputs = qkv(seed=3, dtype="float32")
    seen = engine.call(call("TORCH_SDPA", tensor(cu), inputs=inputs))
    assert seen.raised is None and seen.capture.kernel is None
    assert len(seen.ledger.host_syncs) == 1  # (cu[1:] - cu[:-1]).tolist() on a device cu
    q, k, v = (torch.from_numpy(t["__tensor__"]).double()[0] for t in inputs)
    want = torch.zeros(S, H, D, dtype=torch.float64)
    for start, end in zip(cu[:-1], cu[1:]):
        if end > start:
            scores = torch.einsum("shd,thd->hst", q[start:end], k[start:end]) * D ** -0.5
            want[start:end] = torch.einsum("hst,thd->shd", scores.softmax(-1), v[start:end])
    got = engine.device.plain(seen.output)[0].double()
    assert torch.allclose(got, want, atol=1e-5, rtol=0)


def test_flashinfer_without_sequence_lengths_fails_a_bare_assertion(engine):
    seen = engine.call(call("FLASHINFER", tensor([0, 4, S, 0, 4, S]), max_seqlen=CPU_MAX))
    assert seen.raised == ("AssertionError", "")


def test_flashinfer_splits_the_offsets_into_two_sections(engine):
    seen = engine.call(call("FLASHINFER", tensor([0, 4, S, 0, 4, S]), max_seqlen=CPU_MAX,
                            sequence_lengths=tensor([4, 6], ident=5)))
    assert seen.raised is None and seen.capture.kernel == "cudnn_batch_prefill_with_kv_cache"
    a, plain = seen.capture.args, engine.device.plain
    assert a["batch_offsets_q"] is a["batch_offsets_k"] is a["batch_offsets_o"]
    assert tuple(a["batch_offsets_q"].shape) == (3, 1, 1, 1)
    assert plain(a["batch_offsets_v"]).reshape(-1).tolist() == [0, 4, S]
    assert plain(a["actual_seq_lens_q"]).reshape(-1).tolist() == [4, 6]
    assert a["max_token_per_sequence"] == a["max_sequence_kv"] == 6
    assert a["return_lse"] is False and a["causal"] is False
    workspace = a["workspace_buffer"]  # 128 MiB in shape, one byte in memory
    assert workspace.numel() == ve.FLASHINFER_WORKSPACE_BYTES and workspace.stride() == (0,)
    assert tuple(a["q"].shape) == (S, H, D)  # flattened for the kernel, 4-D again after
    assert tuple(seen.output.shape) == (1, S, H, D)
    assert seen.ledger.host_syncs == []


def test_forward_metadata_is_an_unexpected_keyword(engine):
    seen = engine.call(call("FLASH_ATTN/fa2", CU, max_seqlen=CPU_MAX,
                            forward_metadata={"cu_seqlens": CU, "max_seqlen": 6}))
    assert seen.raised == ("TypeError", "MMEncoderAttention.forward_cuda() got an unexpected "
                                        "keyword argument 'forward_metadata'")


def test_probe_messages_come_from_the_loaded_code(engine):
    messages = ve.probe_messages(engine)
    assert messages["gate/torch_sdpa_wrapper/cu_seqlens/list"][1].split("\n")[1] == "Position: 4"
    assert messages["gate/flashinfer_wrapper/sequence_lengths/int"][1].split("\n")[1] == \
        "Position: 7"
    assert messages["item/2_elements"] == ["RuntimeError",
                                           "a Tensor with 2 elements cannot be converted to Scalar"]
    assert messages["assert/flashinfer/cu_none"] == ["AssertionError", ""]

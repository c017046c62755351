"""aiter's door, as SGLang 0.5.23's aiter_attn calls it: what the kernel's
entry does with the arguments before it computes, written from aiter's public
sources, not from the C++ model.

VisionAiterAttention calls `aiter.flash_attn_varlen_func(q=, k=, v=,
cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=m, max_seqlen_k=m,
softmax_scale=s)`. Read at ROCm/aiter c16d44b93a528b2a4bfd6d8d3409116d465872a9,
the AITER_COMMIT_DEFAULT that sgl-project/sglang docker/rocm.Dockerfile pins
(the release SGLang 0.5.23's image builds is not confirmed); the newest
mirrored commit, e4048607 (2026-08-22), has the same code on this path. The
path runs: aiter/ops/mha.py flash_attn_varlen_func (3447),
FlashAttnVarlenFunc.forward (3244), _flash_attn_varlen_forward (2770), the
compile_ops wrapper (aiter/jit/core.py 1582) behind a torch.library op
(aiter/jit/utils/torch_guard.py 351-354), then the C++ entry: CK's
csrc/py_itfs_ck/mha_varlen_fwd_kernels.cu mha_varlen_fwd or the gfx942/gfx950
assembly's csrc/py_itfs_cu/asm_mha_varlen_fwd.cu fmha_v3_varlen_fwd. Which
kernel the CK build then selects is not read (its generated code).

The entry raises what the source raises, in the source's order. It returns
None when the call goes on to the kernel. It raises NotModelled for whatever no
readable source decides. Where the source is Python, or a torch operation
whose message belongs to torch (`**`, `%`, comparisons, `int()`/`float()`,
`Tensor.size`, `resize_`), the same operation is done here on the same value,
so the exception type and text are the running interpreter's and torch's own.
The dispatcher's type gate runs on a private copy of the op's schema. Its
namespace is renamed in the message, so that gate's text is torch's own as
well.
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Optional, Tuple

from varlen.kernel_entry import NotModelled

AITER_COMMIT = "c16d44b93a528b2a4bfd6d8d3409116d465872a9"

# The op schemas as the libraries register them. aiter: torch_guard.py
# generate_schema (95) applied to the stubs mha.py:929 and mha.py:1029 (both
# are MANUAL_SCHEMA_OPS, torch_guard.py:38), then defined as loadName + schema
# (torch_guard.py:351-352) in the library "aiter". Here they were regenerated
# by running generate_schema on those stubs.
AITER_MHA_VARLEN_FWD_SCHEMA = (
    "mha_varlen_fwd(Tensor(a0!) q, Tensor(a1!) k, Tensor(a2!) v, Tensor(a3!) cu_seqlens_q, "
    "Tensor(a4!)? cu_seqlens_k, SymInt max_seqlen_q, SymInt max_seqlen_k, SymInt min_seqlen_q, "
    "float dropout_p, float softmax_scale, float logits_soft_cap, bool zero_tensors, "
    "bool is_causal, SymInt window_size_left, SymInt window_size_right, SymInt sink_size, "
    "bool return_softmax_lse, bool return_dropout_randval, Tensor(a18!)? out=None, "
    "Tensor(a19!)? block_table=None, Tensor(a20!)? bias=None, Tensor(a21!)? alibi_slopes=None, "
    "Tensor(a22!)? q_descale=None, Tensor(a23!)? k_descale=None, Tensor(a24!)? v_descale=None, "
    "Generator? gen=None, Tensor(a26!)? cu_seqlens_q_padded=None, "
    "Tensor(a27!)? cu_seqlens_k_padded=None, Tensor(a28!)? sink_ptr=None) "
    "-> (Tensor, Tensor, Tensor, Tensor)")
AITER_FMHA_V3_VARLEN_FWD_SCHEMA = (
    "fmha_v3_varlen_fwd(Tensor(a0!) q, Tensor(a1!) k, Tensor(a2!) v, Tensor(a3!) cu_seqlens_q, "
    "Tensor(a4!) cu_seqlens_k, SymInt max_seqlen_q, SymInt max_seqlen_k, SymInt min_seqlen_q, "
    "float dropout_p, float softmax_scale, float logits_soft_cap, bool zero_tensors, "
    "bool is_causal, SymInt window_size_left, SymInt window_size_right, "
    "bool return_softmax_lse, bool return_dropout_randval, SymInt how_v3_bf16_cvt, "
    "Tensor(a18!)? out=None, Tensor(a19!)? block_table=None, Tensor(a20!)? bias=None, "
    "Tensor(a21!)? alibi_slopes=None, Tensor(a22!)? q_descale=None, Tensor(a23!)? k_descale=None, "
    "Tensor(a24!)? v_descale=None, Generator? gen=None, Tensor(a26!)? cu_seqlens_q_padded=None, "
    "Tensor(a27!)? cu_seqlens_k_padded=None) -> (Tensor, Tensor, Tensor, Tensor)")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

def _plain(x):
    import torch
    if isinstance(x, torch.Tensor) and type(x) is not torch.Tensor:
        return x.as_subclass(torch.Tensor)
    return x


# --- the dispatcher's type gate, on a private copy of the schema ---------------------

_LIBRARIES = {}
_CAPTURED: List[Tuple[tuple, dict]] = []


def _gate(namespace: str, schema: str, n_out: int, args: tuple, kwargs: dict,
          watched: tuple, is_device: Callable[[Any], bool]) -> tuple:
    """Parses `args`/`kwargs` against `namespace::schema` as torch's dispatcher
    would. Returns the arguments as the kernel receives them (ints for SymInt or
    int, floats for float). A refusal is re-raised with the real namespace in
    its text, or raised as NotModelled when its `Value:` line would print a
    device tensor (its repr names the device)."""
    import torch
    name = schema.split("(")[0]
    private = f"_varlen_model_{namespace}"
    key = (private, name)
    if key not in _LIBRARIES:
        library = torch.library.Library(private, "FRAGMENT")
        library.define(schema)

        def kernel(*a, **kw):
            _CAPTURED.append((a, kw))
            return torch.empty(0) if n_out == 1 else tuple(torch.empty(0) for _ in range(n_out))

        library.impl(name, kernel, "CPU")
        _LIBRARIES[key] = library
    op = getattr(getattr(torch.ops, private), name)
    args = tuple(_plain(a) for a in args)
    kwargs = {k: _plain(v) for k, v in kwargs.items()}
    _CAPTURED.clear()
    try:
        op(*args, **kwargs)
    except RuntimeError as e:
        if any(isinstance(w, torch.Tensor) and is_device(w) for w in watched):
            raise NotModelled("the dispatcher's refusal would print a device tensor") from None
        raise type(e)(str(e).replace(f"{private}::", f"{namespace}::")) from None
    a, kw = _CAPTURED.pop()
    return a, kw


# --- aiter ------------------------------------------------------------------------------

def _padded(d: int) -> int:
    # mha.py:3278-3282: F.pad of the last dim up to a multiple of 8.
    return d + (8 - d % 8 if d % 8 != 0 else 0)


def _last_stride_after(t, padded: bool) -> Tuple[int, Tuple[int, ...]]:
    """stride(-1) and strides of a q/k/v after F.pad (a fresh contiguous tensor)
    and maybe_contiguous (mha.py:1708: `.contiguous()` when stride(-1) != 1,
    which hands back the tensor itself when torch already calls it contiguous)."""
    shape = tuple(t.shape)
    if padded:
        fresh = True
    elif t.stride(-1) != 1:
        fresh = not t.is_contiguous()
    else:
        fresh = False
    if not fresh:
        return t.stride(-1), tuple(t.stride())
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= max(size, 1)
    return 1, tuple(reversed(strides))


def aiter_varlen_entry(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                       softmax_scale, is_device: Callable[[Any], bool], *,
                       gfx: Optional[str] = None, enable_ck: bool = True) -> None:
    """aiter.flash_attn_varlen_func as VisionAiterAttention calls it, up to the
    kernel. `gfx` picks the GPU arch that aiter's get_gfx() reports. With
    gfx=None, both SGLang ROCm targets are run (gfx942 and gfx950): when they
    agree you get that outcome, otherwise NotModelled. `enable_ck` is the
    ENABLE_CK environment switch (aiter/jit/core.py:31, default on)."""
    import torch
    for t in (q, k, v):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise NotModelled("q, k and v other than 3-d tensors")
    arches = (gfx,) if gfx is not None else ("gfx942", "gfx950")
    outcomes = []
    for arch in arches:
        try:
            _aiter_one(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                       softmax_scale, is_device, arch, enable_ck)
            outcomes.append((None, None, None))
        except Exception as e:  # noqa: BLE001 - every outcome is compared
            outcomes.append((type(e), str(e), e))
    first = outcomes[0]
    if all(o[:2] == first[:2] for o in outcomes):
        if first[2] is not None:
            raise first[2]
        return None
    raise NotModelled("aiter's outcome depends on the GPU arch: " + "; ".join(
        f"{a}: {o[0].__name__ + ': ' + o[1] if o[0] else 'unrefused'}"
        for a, o in zip(arches, outcomes)))


def _aiter_one(q, k, v, cu_q, cu_k, m_q, m_k, s, is_device, arch, enable_ck) -> None:
    import torch
    bf16 = torch.bfloat16
    # mha.py:3473: block_table is None here, so no NotImplementedError.

    # mha.py:3538-3566 (the gfx1250 PR3039 ASM gate). It reads k's heads, and
    # it needs causal, which is False here, so it never routes. Its modulo
    # (3550) runs first.
    if arch == "gfx1250" and q.dtype == bf16:
        if q.shape[-1] in (64, 128) and v.shape[-1] == q.shape[-1]:
            q.shape[-2] % k.shape[-2]  # ZeroDivisionError: integer modulo by zero
    # mha.py:3598-3622 -> aiter/ops/flydsl/fmha_kernels.py:242-257: FlyDSL
    # takes gfx1250, bf16, D_qk 192 and D_v 128.
    if arch == "gfx1250" and q.shape[-1] == 192 and v.shape[-1] == 128 and q.dtype == bf16:
        raise NotModelled("aiter's FlyDSL gfx1250 D192/V128 varlen path")
    # mha.py:3624-3648: with ENABLE_CK off, aiter's Triton attention runs.
    if not enable_ck:
        raise NotModelled("aiter's Triton varlen path (ENABLE_CK=0)")

    # mha.py:3650 FlashAttnVarlenFunc.apply -> forward (3244).
    # mha.py:3275: the default scale. For D = 0 this is 0 ** -0.5
    # (ZeroDivisionError, Python's text).
    if s is None:
        s = q.shape[-1] ** (-0.5)
    # mha.py:3278-3282: q and k are padded by q's amount, v by its own.
    pad_q = q.shape[-1] % 8 != 0
    pad_v = v.shape[-1] % 8 != 0
    hdim_q = _padded(q.shape[-1])
    hdim_k = k.shape[-1] + (hdim_q - q.shape[-1])
    hdim_v = _padded(v.shape[-1])

    # _flash_attn_varlen_forward (2770).
    nhead_q = q.shape[1]                       # 2801
    batch_size = cu_q.numel() - 1              # 2802: AttributeError for None/int/list
    nhead_k = v.shape[-2]                      # 2804: v's heads, not k's
    # 2812-2814: the window and sink clamps compare m as `-1 >= m` and `0 >= m`,
    # then take their truth value. A str or None m raises TypeError. A tensor m
    # with no element or with more than one raises RuntimeError. A device
    # tensor m syncs.
    bool(-1 >= m_k)
    bool(-1 >= m_k)
    bool(0 >= m_k)
    # 2917: maybe_contiguous on the padded q, k, v.
    q_last, _ = _last_stride_after(q, pad_q)
    k_last, k_strides = _last_stride_after(k, pad_q)
    v_last, _ = _last_stride_after(v, pad_v)

    # 2919 -> 2896-2915: the OPUS gfx950 D192/V128 path (unless
    # AITER_DISABLE_FMHA_OPUS is set).
    if int(os.environ.get("AITER_DISABLE_FMHA_OPUS", "0")) == 0 and arch == "gfx950" and \
            q.dtype == bf16 and hdim_q == 192 and hdim_v == 128:
        nhead_q % nhead_k  # 2906: ZeroDivisionError when v has no heads
        if nhead_q % nhead_k == 0:
            # 2927-2935: float(s), then int(m), int(m) at the call site.
            float(s)
            int(m_q)
            int(m_k)
            raise NotModelled("aiter's OPUS gfx950 D192/V128 entry "
                              "(csrc/py_itfs_cu/fmha_fwd_bf16_opus_kernels.cu AITER_CHECKs)")
    # 2940 -> 2862-2893: the gfx1250 ASM packed-varlen path (bf16, D 64/128 = D_v;
    # D128 wants no sink, D64 wants one, so only D128 is taken here).
    if arch == "gfx1250" and q.dtype == bf16 and hdim_q in (64, 128) and hdim_v == hdim_q:
        nhead_q % nhead_k  # 2871
        if nhead_q % nhead_k == 0 and hdim_q == 128:
            raise NotModelled("aiter's gfx1250 ASM varlen path (fmha_fwd_with_sink_varlen_asm)")
    if arch == "gfx1250":
        raise NotModelled("aiter's CK varlen build on gfx1250")

    # 2967 -> 2838-2861: the hand-written ASM (v3) on gfx942/gfx950: bf16,
    # (D, D_v) in {(128, 128), (192, 128)}, heads dividing, and for 192/128
    # a KV extent under 2**32 bytes. (256, 256) also needs fp8.
    path = "ck"
    if arch in ("gfx942", "gfx950") and (hdim_q, hdim_v) in ((128, 128), (192, 128)):
        nhead_q % nhead_k  # 2849: ZeroDivisionError when v has no heads
        if nhead_q % nhead_k == 0 and q.dtype == bf16:
            fits = True
            if (hdim_q, hdim_v) == (192, 128):
                # 2859 -> mha.py:28-29: int(m) (ValueError for nan,
                # OverflowError for inf), times k's and v's token strides.
                _, v_strides = _last_stride_after(v, pad_v)
                k_bytes = int(m_k) * int(k_strides[-3]) * k.element_size()
                v_bytes = int(m_k) * int(v_strides[-3]) * v.element_size()
                fits = not (k_bytes >= (1 << 32) or v_bytes >= (1 << 32))
            if fits:
                path = "v3"

    # The op behind the stub: torch.ops.aiter.<name> (torch_guard.py:292-296).
    # Its type gate parses every argument against the generated schema. m must
    # be an int (SymInt; a bool or a one-element tensor is accepted) and s a
    # float. A float m and a str, list or complex s are refused here.
    if path == "ck":
        (_, _, _, _, _, mq, mk, _, _, s_, *_), _ = _gate(
            "aiter", AITER_MHA_VARLEN_FWD_SCHEMA, 4,
            (q, k, v, cu_q, cu_k, m_q, m_k, 0, 0.0, s, 0.0, False, False, -1, -1, 0, False, False),
            dict(out=None, block_table=None, bias=None, alibi_slopes=None, q_descale=None,
                 k_descale=None, v_descale=None, gen=None, cu_seqlens_q_padded=None,
                 cu_seqlens_k_padded=None, sink_ptr=None),
            (m_q, m_k, s), is_device)
        # core.py:1618 -> mha.py:765-775 (cmdGenFunc_mha_varlen_fwd): only
        # fp16, bf16 (and fp8) q have a CK build.
        if str(q.dtype) not in ("torch.float16", "torch.bfloat16"):
            if "float8" in str(q.dtype):
                raise NotModelled("fp8 q")
            raise NotImplementedError("Unsupported dtype for MHA")
    else:
        (_, _, _, _, _, mq, mk, *_), _ = _gate(
            "aiter", AITER_FMHA_V3_VARLEN_FWD_SCHEMA, 4,
            (q, k, v, cu_q, cu_k, m_q, m_k, 0, 0.0, s, 0.0, False, False, -1, -1, False, False, 1,
             None, None, None, None, None, None, None, None, None, None),
            {}, (m_q, m_k, s), is_device)
    # core.py:1624 get_module (JIT build), then 1857 check_args on the op's
    # first call. It sees ints and floats after the gate, so it passes. Then
    # core.py:1887 op(...), the pybind11 call, narrows m to a C int.
    if not (_INT32_MIN <= mq <= _INT32_MAX and _INT32_MIN <= mk <= _INT32_MAX):
        raise NotModelled("pybind11's refusal of an int max_seqlen beyond a C int")
    _aiter_cpp(path, q, k, v, cu_q, cu_k, hdim_q, hdim_k, hdim_v, (q_last, k_last, v_last),
               batch_size, is_device)


def _aiter_cpp(path, q, k, v, cu_q, cu_k, hdim_q, hdim_k, hdim_v, lasts, batch_size,
               is_device) -> None:
    """The C++ entry's TORCH_CHECKs (RuntimeError, the check's own text).
    Lines: CK = mha_varlen_fwd_kernels.cu, v3 = asm_mha_varlen_fwd.cu.
    Macros: csrc/include/mha_common.h:13-17."""
    import torch

    def check(ok: bool, message: str) -> None:
        if not ok:
            raise RuntimeError(message)

    ck = path == "ck"
    # CK 392 / v3 273: q's dtype is fp16 or bf16 by now.
    check(k.dtype == q.dtype, "query and key must have the same dtype")    # CK 395 / v3 276
    check(v.dtype == q.dtype, "query and value must have the same dtype")  # CK 396 / v3 277
    # CK 410 / v3 306: no descales are passed.
    check(cu_q.dtype == torch.int32, "cu_seqlens_q must have dtype int32")  # CK 417 / v3 278
    check(cu_k.dtype == torch.int32, "cu_seqlens_k must have dtype int32")  # CK 419 / v3 279
    # CK 422-425 / v3 293-295: CHECK_DEVICE is `x.is_cuda()`, "<x> must be on CUDA".
    check(is_device(q), "q must be on CUDA")
    check(is_device(k), "k must be on CUDA")
    check(is_device(v), "v must be on CUDA")
    check(is_device(cu_q), "cu_seqlens_q must be on CUDA")
    cu_k_name = "cu_seqlens_k.value()" if ck else "cu_seqlens_k"
    check(is_device(cu_k), f"{cu_k_name} must be on CUDA")
    # CK 440-442 / v3 319-321, on the padded, maybe_contiguous'd q, k, v.
    for last in lasts:
        check(last == 1, "Input tensor must have contiguous last dimension")
    check(cu_q.is_contiguous(), "cu_seqlens_q must be contiguous")          # CK 443 / v3 322
    check(cu_k.is_contiguous(), f"{cu_k_name} must be contiguous")          # CK 445 / v3 323
    num_heads, num_heads_k = q.shape[1], k.shape[-2]  # CK 450-454 / v3 327-331
    check(batch_size > 0, "batch size must be postive")                     # CK 473 / v3 350
    check(hdim_q <= 256, "CK only supports head dimension at most 256")     # CK 474 / v3 351
    check(hdim_v <= 256, "CK only supports head dimension at most 256")     # CK 475 / v3 352
    # CK 476-477 / v3 353-354 (multiples of 8) hold after the padding.
    if num_heads_k == 0:
        raise NotModelled("C++ `num_heads % num_heads_k` with no key heads "
                          "(integer division by zero)")
    check(num_heads % num_heads_k == 0,
          "Number of heads in key/value must divide number of heads in query")  # CK 478 / v3 355
    # CK 500-513 / v3 377-389: CHECK_SHAPE, "<x> must have shape (<args>)".
    total_k = k.shape[0]
    check(hdim_k == hdim_q, "k must have shape (total_k, num_heads_k, head_size_q)")
    check(tuple(v.shape[:2]) == (total_k, num_heads_k),
          "v must have shape (total_k, num_heads_k, head_size_v)")
    check(tuple(cu_q.shape) == (batch_size + 1,), "cu_seqlens_q must have shape (batch_size + 1)")
    check(tuple(cu_k.shape) == (batch_size + 1,), f"{cu_k_name} must have shape (batch_size + 1)")
    # CK 579-671 / v3 453-494. A max_seqlen_k <= 0 zero-fills out. Otherwise
    # aiter::mha_fwd picks a kernel ("invalid argument for fmha_fwd" /
    # "... fmha_v3_varlen_fwd" when none fits). That choice comes from code
    # generated by the composable_kernel submodule and is assumed to succeed.
    return None

"""torch's own scaled_dot_product_attention as a kernel-level varlen backend.

SDPA is dense ([B, H, L, D]), so packed sequences run one call per sequence:
each sequence's q, k and v rows are viewed (not copied) as [1, H, L, D] and
the result is copied into its rows of o. Grouped-query attention goes through
SDPA's enable_gqa, which the fused kernels take without repeating k and v.

On the CPU the calls are pinned to torch's CPU flash kernel
(aten::_scaled_dot_product_flash_attention_for_cpu) with sdpa_kernel, so a
launch it cannot take raises instead of silently running the math path.
Measured with torch 2.15's profiler: the flash kernel takes float32, float16,
bfloat16 and float64, strided views and GQA; a value head dim that differs
from the query/key head dim sends SDPA to the math path (which also repeats
k and v for GQA), so this backend does not claim it. On a GPU (the
torch_sdpa_cuda entry, present only where torch sees one) SDPA chooses among
its CUDA kernels as usual.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from varlen import spec


def _offsets(name, cu_seqlens):
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() == 0:
        raise ValueError(f"{name} has shape {tuple(cu_seqlens.shape)}; it must be a 1-D tensor of B+1 offsets")
    return [int(x) for x in cu_seqlens.tolist()]


def sdpa_varlen(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                softmax_scale=None):
    """Fills o [T, Hq, D] with attention of q [T, Hq, D] over k, v [T, Hkv, D].

    max_seqlen_q and max_seqlen_k are ignored: every call gets its sequence's
    exact length from the offsets.
    """
    del max_seqlen_q, max_seqlen_k
    starts_q = _offsets("cu_seqlens_q", cu_seqlens_q)
    starts_k = _offsets("cu_seqlens_k", cu_seqlens_k)
    if len(starts_q) != len(starts_k):
        raise ValueError(f"cu_seqlens_q has {len(starts_q)} offsets and cu_seqlens_k {len(starts_k)}; "
                         "they must describe the same number of sequences")
    if q.shape[-1] != v.shape[-1]:
        raise ValueError(f"v's head dim {v.shape[-1]} differs from q's {q.shape[-1]}; torch's CPU "
                         "flash kernel needs them equal (SDPA would fall back to its math path)")
    gqa = q.shape[1] != k.shape[1]
    # CPU: the flash kernel or an error. CUDA: SDPA's own choice.
    pin = sdpa_kernel([SDPBackend.FLASH_ATTENTION]) if q.device.type == "cpu" else contextlib.nullcontext()
    with pin:
        for i in range(len(starts_q) - 1):
            q0, q1 = starts_q[i], starts_q[i + 1]
            k0, k1 = starts_k[i], starts_k[i + 1]
            if q1 == q0:
                continue  # a zero-length sequence owns no rows of o
            out = F.scaled_dot_product_attention(
                q[q0:q1].transpose(0, 1).unsqueeze(0),
                k[k0:k1].transpose(0, 1).unsqueeze(0),
                v[k0:k1].transpose(0, 1).unsqueeze(0),
                is_causal=False,
                scale=softmax_scale,
                enable_gqa=gqa,
            )
            o[q0:q1].copy_(out[0].transpose(0, 1))
    return None


BACKENDS = [
    spec.KernelBackend(
        name="torch_sdpa",
        fn=sdpa_varlen,
        capabilities=spec.Capabilities(
            dtypes=("float32", "float16", "bfloat16", "float64"),
            distinct_value_head_dim=False,
            device="cpu",
        ),
        description=f"torch {torch.__version__} F.scaled_dot_product_attention per sequence, "
                    "pinned to the CPU flash kernel",
    ),
]

if torch.cuda.is_available():
    BACKENDS.append(spec.KernelBackend(
        name="torch_sdpa_cuda",
        fn=sdpa_varlen,
        capabilities=spec.Capabilities(
            dtypes=("float32", "float16", "bfloat16"),
            distinct_value_head_dim=False,
            device="cuda",
        ),
        description=f"torch {torch.__version__} F.scaled_dot_product_attention per sequence "
                    "on the GPU (SDPA's own kernel choice)",
    ))

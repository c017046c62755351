"""Deliberately broken backends, to show that the suite catches their bugs
and hands back a case that replays them.

broken_max_seqlen_tensor is a call-level backend with triton_attn's calling
convention (forward(q, k, v, bsz, cu_seqlens=..., max_seqlen=...,
forward_metadata=...)) whose argument handling has one bug: a max_seqlen
given as a tensor is not read, and the launch assumes 64 rows per sequence,
so every sequence longer than 64 keeps rows it never computed. An int
max_seqlen, or prepared metadata, is handled right.
"""

import torch

from varlen import spec

ASSUMED_MAX = 64


class BrokenTritonLikeAttention:
    def __init__(self, ctx: spec.CallContext):
        self.ctx = ctx

    def forward(self, q, k, v, bsz, cu_seqlens=None, seq_len=None, max_seqlen=None,
                forward_metadata=None, softmax_scale=None, **kwargs):
        if forward_metadata is not None:
            cu, max_rows = forward_metadata.cu_seqlens, int(forward_metadata.max_seqlen)
        else:
            cu = cu_seqlens
            # The bug: a tensor max_seqlen is never read.
            max_rows = ASSUMED_MAX if isinstance(max_seqlen, torch.Tensor) else (
                int(max_seqlen) if max_seqlen is not None else int((cu[1:] - cu[:-1]).max()))
        out = torch.zeros_like(q)
        offsets = [int(x) for x in cu.tolist()]
        group = q.shape[1] // k.shape[1]
        for start, end in zip(offsets, offsets[1:]):
            rows = min(end - start, max_rows)
            if rows <= 0:
                continue
            qs = q[start:start + rows].transpose(0, 1).float()
            ks = k[start:end].transpose(0, 1).float().repeat_interleave(group, 0)
            vs = v[start:end].transpose(0, 1).float().repeat_interleave(group, 0)
            scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
            weights = torch.softmax(qs @ ks.transpose(1, 2) * scale, dim=-1)
            out[start:start + rows] = (weights @ vs).transpose(0, 1).to(q.dtype)
        return out


BACKENDS = [
    spec.CallBackend(
        name="broken_max_seqlen_tensor",
        make=BrokenTritonLikeAttention,
        profile="triton_attn",
        version="0.5.23",
        capabilities=spec.Capabilities(dtypes=("float32", "float16", "bfloat16"),
                                       max_head_dim=128, grouped_query_attention=True,
                                       distinct_value_head_dim=False, strided_inputs=True),
        description="triton_attn's calling convention with a max_seqlen tensor never read",
    )
]

"""Backends written in vLLM's convention (what a platform plugin's encoder
attention or an MMEncoderAttention subclass looks like), for the tests of
call-level checking in that convention.

split_sdpa_encoder_attention follows TORCH_SDPA: the layer is built as
MMEncoderAttention(num_heads, head_size, scale, num_kv_heads); forward
takes [b, s, H, D] (or [b, s, H * D]) q, k and v with optional cu_seqlens,
max_seqlen and sequence_lengths, splits the tokens by the cu_seqlens
differences and runs SDPA per sequence; the output is [b, s, H * D].

cross_image_encoder_attention has one bug: it never reads cu_seqlens, so
every image attends to every other image packed beside it.
"""

import torch
import torch.nn.functional as F

from varlen import spec


class SplitSdpaEncoderAttention:
    def __init__(self, ctx: spec.CallContext):
        self.num_heads, self.num_kv_heads = ctx.num_heads, ctx.num_kv_heads
        self.head_size = ctx.head_dim
        self.scale = ctx.softmax_scale if ctx.softmax_scale is not None else \
            1.0 / (self.head_size ** 0.5)

    def _attend(self, q, k, v):  # [1, L, H, D] each
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=self.scale,
            enable_gqa=self.num_heads != self.num_kv_heads)
        return out.transpose(1, 2)

    def sequences(self, cu_seqlens, q_len):
        return (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()

    def forward(self, query, key, value, cu_seqlens=None, max_seqlen=None,
                sequence_lengths=None):
        bsz, q_len = query.size()[:2]
        q = query.view(bsz, q_len, self.num_heads, self.head_size)
        k = key.view(bsz, key.size(1), self.num_kv_heads, self.head_size)
        v = value.view(bsz, value.size(1), self.num_kv_heads, self.head_size)
        if cu_seqlens is None:
            out = self._attend(q, k, v)
        else:
            lengths = self.sequences(cu_seqlens, q_len)
            parts = zip(torch.split(q, lengths, dim=1), torch.split(k, lengths, dim=1),
                        torch.split(v, lengths, dim=1))
            out = torch.cat([self._attend(*part) for part in parts], dim=1)
        return out.reshape(bsz, q_len, -1)


class CrossImageEncoderAttention(SplitSdpaEncoderAttention):
    def sequences(self, cu_seqlens, q_len):
        return [q_len]  # the bug: one sequence of every packed token


def _backend(name, make, description):
    return spec.CallBackend(
        name=name, make=make, profile="TORCH_SDPA", engine="vllm",
        capabilities=spec.Capabilities(dtypes=("float32", "bfloat16"), max_head_dim=128,
                                       grouped_query_attention=True,
                                       distinct_value_head_dim=False, strided_inputs=True),
        description=description)


BACKENDS = [
    _backend("split_sdpa_encoder_attention", SplitSdpaEncoderAttention,
             "vLLM's TORCH_SDPA convention, one SDPA per sequence"),
    _backend("cross_image_encoder_attention", CrossImageEncoderAttention,
             "vLLM's TORCH_SDPA convention, cu_seqlens never read"),
]

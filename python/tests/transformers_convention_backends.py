"""Attention functions written in transformers' convention (what a backend
author registers in AttentionInterface), for the tests of call-level
checking in that convention.

varlen_attention is correct: fn(module, query, key, value, attention_mask,
scaling=None, dropout=0.0, **kwargs) with [1, H, T, D] tensors; given
cu_seq_lens_q/k and max_length_q/k it attends within each sequence, given
none it attends over the whole call; it returns ([1, T, H, D], None).
Registered under flash_attention_2 (transformers' vision layer then calls it
once over the pack with the varlen keywords) and under a name without
"flash" (one call per image, on the split path).

Two carry one bug each:
- int_max_only_attention refuses a max_length_q that is not a Python int, as
  FlashAttention 4's DSL does (transformers #48353): fine through the vision
  layer where it hands an int (5.15.0 on), wrong where it hands a 0-d tensor
  (5.0 to 5.14.x), and wrong in every band for a caller of the interface
  that passes a tensor (the text models' packed position_ids do);
- cross_image_attention, registered under a name of its own holding
  "flash", never reads cu_seq_lens_q, so every image attends to every other
  image of the pack.
"""

import torch

from varlen import spec


def _attend(query, key, value, scaling):  # [1, H, L, D] each
    """Attention in float64 on dense copies: the output's bits do not depend
    on where a sequence sits in the pack (BLAS paths vary with a view's
    address), and a NaN propagates (torch's CPU SDPA kernel writes zeros for
    a query row holding one, pytorch #141128)."""
    dtype, groups = query.dtype, query.shape[1] // key.shape[1]
    query, key, value = (x.double().contiguous() for x in (query, key, value))
    key, value = (x.repeat_interleave(groups, dim=1) for x in (key, value))
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    return torch.matmul(torch.softmax(scores, dim=-1), value).to(dtype)


def varlen_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                     cu_seq_lens_q=None, cu_seq_lens_k=None, max_length_q=None,
                     max_length_k=None, **kwargs):
    if cu_seq_lens_q is None:
        out = _attend(query, key, value, scaling)
    else:
        lengths = (cu_seq_lens_q[1:] - cu_seq_lens_q[:-1]).tolist()
        out = torch.cat([_attend(q, k, v, scaling) for q, k, v in
                         zip(*(x.split(lengths, dim=2) for x in (query, key, value)))], dim=2)
    return out.transpose(1, 2), None


def int_max_only_attention(module, query, key, value, attention_mask, max_length_q=None,
                           **kwargs):
    if max_length_q is not None and not isinstance(max_length_q, int):
        raise TypeError(f"max_length_q must be an int, got {type(max_length_q).__name__}")
    return varlen_attention(module, query, key, value, attention_mask, max_length_q=max_length_q,
                            **kwargs)


def cross_image_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    return _attend(query, key, value, scaling).transpose(1, 2), None


def _backend(name, registered_as, fn, version="", description=""):
    return spec.CallBackend(
        name=name, make=lambda ctx: fn, profile=registered_as, engine="transformers",
        version=version,
        capabilities=spec.Capabilities(dtypes=("float32", "bfloat16"), max_head_dim=128),
        description=description)


BACKENDS = [
    _backend("varlen_flash_function", "flash_attention_2", varlen_attention,
             description="transformers' convention, a flash name: one call over the pack"),
    _backend("varlen_split_function", "varlen_split", varlen_attention,
             description="transformers' convention, another name: one call per image"),
    _backend("int_max_only_function_5_14", "flash_attention_2", int_max_only_attention,
             "5.14.1", "refuses a tensor max_length_q, checked against transformers 5.14.1"),
    _backend("int_max_only_function_5_25", "flash_attention_2", int_max_only_attention,
             "5.25.0", "refuses a tensor max_length_q, checked against transformers 5.25.0"),
    _backend("cross_image_function", "varlen_flash", cross_image_attention,
             description="cu_seq_lens_q never read"),
]

"""Backends that are right except on some calls, where they fault the way new
Python backends (and the C extensions under them) do: a kernel-level one,
fault_kernel, and a call-level one with triton_attn's calling convention,
fault_call. The fault is chosen by VARLEN_TEST_FAULT:

  none                right everywhere (the fault-free baseline)
  segfault            reads address 0 through ctypes, as a C extension's bad read does
  abort               os.abort(), as a failed device-side assert ends a process
  exit0               os._exit(0) mid-call, as a library calling exit() does
  hang                never returns
  oom                 allocates and touches memory until it is stopped
  thread_exception    a helper thread raises, and the call returns as if nothing happened
  write_past_output   stores 4 bytes past the end of o through its pointer
  scale_q_in_place    scales q in place, then computes

The faulty calls are those whose query rows leave 3 when divided by 4.
fault_call knows the faults that do not return (segfault to oom).
"""

import ctypes
import os
import threading
import time

import torch

from varlen import spec

FAULT = os.environ.get("VARLEN_TEST_FAULT", "none")


def _attention(q, k, v, o, cu_seqlens_q, scale):
    offsets = cu_seqlens_q.tolist()
    group = q.shape[1] // k.shape[1]
    for start, end in zip(offsets, offsets[1:]):
        if end > start:
            out = torch.nn.functional.scaled_dot_product_attention(
                q[start:end].transpose(0, 1).double(),
                k[start:end].transpose(0, 1).double().repeat_interleave(group, 0),
                v[start:end].transpose(0, 1).double().repeat_interleave(group, 0), scale=scale)
            o[start:end].copy_(out.transpose(0, 1))


def _fault_without_return():
    """The faults that end the call without a result (or never end it)."""
    if FAULT == "segfault":
        ctypes.string_at(0)
    elif FAULT == "abort":
        os.abort()
    elif FAULT == "exit0":
        os._exit(0)
    elif FAULT == "hang":
        while True:
            time.sleep(1)
    elif FAULT == "oom":
        blocks = []
        for _ in range(256):  # 16 GiB at most; the supervisor stops it long before
            blocks.append(bytearray(64 << 20))
        while True:
            time.sleep(1)


def fault_kernel(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale):
    if FAULT == "none" or int(cu_seqlens_q[-1]) % 4 != 3:
        return _attention(q, k, v, o, cu_seqlens_q, scale)
    _fault_without_return()
    if FAULT == "thread_exception":
        def helper():
            raise RuntimeError("raised on a helper thread")
        thread = threading.Thread(target=helper, name="fault-helper")
        thread.start()
        thread.join()
    elif FAULT == "write_past_output":
        _attention(q, k, v, o, cu_seqlens_q, scale)
        ctypes.memset(o.data_ptr() + o.numel() * o.element_size(), 0x7F, 4)
        return None
    elif FAULT == "scale_q_in_place":
        q.mul_(2)
        return _attention(q, k, v, o, cu_seqlens_q, scale / 2)
    return _attention(q, k, v, o, cu_seqlens_q, scale)


class FaultCallAttention:
    """triton_attn's forward: boundaries from forward_metadata or cu_seqlens."""

    def __init__(self, ctx: spec.CallContext):
        self.ctx = ctx

    def forward(self, q, k, v, bsz, cu_seqlens=None, seq_len=None, max_seqlen=None,
                forward_metadata=None, softmax_scale=None, **kwargs):
        if q.shape[0] % 4 == 3:
            _fault_without_return()
        cu = forward_metadata.cu_seqlens if forward_metadata is not None else cu_seqlens
        out = torch.zeros_like(q)
        scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
        _attention(q, k, v, out, cu, scale)
        return out


BACKENDS = [
    spec.KernelBackend(
        name="fault_kernel",
        fn=fault_kernel,
        capabilities=spec.Capabilities(dtypes=("float32", "float16", "bfloat16"),
                                       max_head_dim=128, strided_inputs=True),
        description="float64 SDPA per sequence, faulting on a quarter of launches as "
                    "VARLEN_TEST_FAULT says",
    )
]

CALL_BACKENDS = [
    spec.CallBackend(
        name="fault_call",
        make=FaultCallAttention,
        profile="triton_attn",
        version="0.5.23",
        capabilities=spec.Capabilities(dtypes=("float32", "float16", "bfloat16"),
                                       max_head_dim=128, grouped_query_attention=True,
                                       distinct_value_head_dim=False, strided_inputs=True),
        description="triton_attn's calling convention, faulting on a quarter of calls as "
                    "VARLEN_TEST_FAULT says",
    ),
]

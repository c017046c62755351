"""A kernel-level backend that is right except on some launches, where it
faults the way new Python backends (and the C extensions under them) do. The
fault is chosen by VARLEN_TEST_FAULT:

  none                right everywhere (the fault-free baseline)
  segfault            reads address 0 through ctypes, as a C extension's bad read does
  abort               os.abort(), as a failed device-side assert ends a process
  exit0               os._exit(0) mid-call, as a library calling exit() does
  hang                never returns
  oom                 allocates and touches memory until it is stopped
  thread_exception    a helper thread raises, and the call returns as if nothing happened
  write_past_output   stores 4 bytes past the end of o through its pointer
  scale_q_in_place    scales q in place, then computes

The faulty launches are those whose query rows leave 3 when divided by 4.
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


def fault_kernel(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, scale):
    if FAULT == "none" or int(cu_seqlens_q[-1]) % 4 != 3:
        return _attention(q, k, v, o, cu_seqlens_q, scale)
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
    elif FAULT == "thread_exception":
        def helper():
            raise RuntimeError("raised on a helper thread")
        thread = threading.Thread(target=helper, name="fault-helper")
        thread.start()
        thread.join()
        return _attention(q, k, v, o, cu_seqlens_q, scale)
    elif FAULT == "write_past_output":
        _attention(q, k, v, o, cu_seqlens_q, scale)
        ctypes.memset(o.data_ptr() + o.numel() * o.element_size(), 0x7F, 4)
        return None
    elif FAULT == "scale_q_in_place":
        q.mul_(2)
        return _attention(q, k, v, o, cu_seqlens_q, scale / 2)
    return _attention(q, k, v, o, cu_seqlens_q, scale)


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

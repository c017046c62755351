"""Third-party attention backends, one module each, described with varlen.spec.

Every module defines BACKENDS, a list of spec.KernelBackend and spec.CallBackend
objects, empty where what the backend needs is missing (sglang then says why in
UNAVAILABLE_REASON): torch_sdpa (torch's own SDPA) and sglang (SGLang's own
kernel and classes, read from its wheel).
"""

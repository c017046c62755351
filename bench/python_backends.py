"""Python backends beside the C++ ones, side by side in one process.

1. Per-case cost of one torch SDPA case of 1,000 tokens (2 heads, head dim
   80, bfloat16: inside the CPU oracle's budget) through the whole harness
   (varlen.repro: resolution, the float64 oracle, the judge), on cpu_flash,
   on torch_sdpa registered at kernel level, and on the same torch
   computation as a call-level backend. The binding's own cost is what a
   kernel-level run (varlen.time_run: binding and backend, no oracle) spends
   outside the torch call, at 2 and at 16 heads.
2. cpu_flash beside torch_sdpa on the bench shapes (16 heads, head dim 80,
   bfloat16, 256 to 4,096 patches in one image), the backend alone
   (varlen.time_run), in multiply-adds per second.

    PYTHONPATH=build/release/python build/python-env/bin/python bench/python_backends.py

Figures go to docs/measurements.md.
"""

import json
import os
import statistics
import tempfile
import time

import torch

import varlen
from varlen import _bridge, spec
from varlen.backends import torch_sdpa

inner = []  # seconds of each torch call, as the backends see them


def _timed(fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            inner.append(time.perf_counter() - start)
    return wrapper


sdpa = _timed(torch_sdpa.sdpa_varlen)
varlen.register(spec.KernelBackend(name="bench_torch_sdpa", fn=sdpa,
                                   capabilities=torch_sdpa.BACKENDS[0].capabilities))


class SdpaCall:
    """torch SDPA behind an engine-like forward (fa3's calling convention)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def forward(self, q, k, v, bsz, cu_seqlens=None, max_seqlen=None, softmax_scale=None, **kw):
        o = torch.empty_like(q)
        sdpa(q, k, v, o, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, softmax_scale)
        return o


varlen.register(spec.CallBackend(name="bench_torch_sdpa_call", make=SdpaCall, profile="fa3",
                                 capabilities=torch_sdpa.BACKENDS[0].capabilities))


def case_file(tokens, heads=16, dim=80, dtype="bfloat16"):
    c = {"name": f"bench-{tokens}", "source": "bench", "mode": "faithful",
         "geometry": {"seq_lens": [tokens], "num_heads": heads, "head_dim": dim, "dtype": dtype},
         "data": {"seed": 1},
         "call": {"profile": "fa3",
                  "cu_seqlens": {"tensor": [0, tokens], "dtype": "int32", "device": "cuda"},
                  "kwargs": {"max_seqlen": tokens}},
         "expect": {"outcome": "success"}}
    path = os.path.join(tempfile.mkdtemp(), f"bench-{tokens}.json")
    with open(path, "w") as f:
        json.dump(c, f)
    return path


def per_case(path, backend, repeats=5):
    times = []
    for _ in range(repeats):
        inner.clear()
        start = time.perf_counter()
        [outcome] = varlen.repro(path, backend)
        times.append((time.perf_counter() - start, sum(inner)))
        assert outcome.verdict == "PASS", outcome.text
    return min(times)


def main():
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    path = case_file(1000, heads=2)
    print("\n| backend | case (whole harness) | torch call | outside torch |")
    print("|---|---|---|---|")
    for backend in ("cpu_flash", "bench_torch_sdpa", "bench_torch_sdpa_call"):
        total, torch_s = per_case(path, backend)
        outside = "" if backend == "cpu_flash" else f"{total - torch_s:.3f} s"
        torch_col = "" if backend == "cpu_flash" else f"{torch_s:.3f} s"
        print(f"| {backend} | {total:.3f} s | {torch_col} | {outside} |")
        if backend == "bench_torch_sdpa":
            kernel_case = total
    print("\n| heads | bench_torch_sdpa alone | torch call | binding | binding / case |")
    print("|---|---|---|---|---|")
    for heads in (2, 16):
        p = case_file(1000, heads=heads)
        best = None
        for _ in range(7):
            inner.clear()
            [run] = varlen.time_run("bench_torch_sdpa", p, 1)
            if best is None or run - inner[-1] < best[0] - best[1]:
                best = (run, inner[-1])
        share = f"{(best[0] - best[1]) / kernel_case:.2%}" if heads == 2 else ""
        print(f"| {heads} | {best[0]:.4f} s | {best[1]:.4f} s | {(best[0] - best[1]) * 1e3:.2f} ms | "
              f"{share} |")

    print("\n| patches | cpu_flash | torch_sdpa | torch / cpu_flash |")
    print("|---|---|---|---|")
    for tokens in (256, 1024, 2048, 4096):
        p = case_file(tokens)
        macs = tokens * tokens * 16 * 160
        flash = min(varlen.time_run("cpu_flash", p, 5))
        torch_t = min(varlen.time_run("bench_torch_sdpa", p, 5))
        print(f"| {tokens} | {macs / flash / 1e9:.1f} GMAC/s | {macs / torch_t / 1e9:.1f} GMAC/s | "
              f"{flash / torch_t:.2f} |")


if __name__ == "__main__":
    main()

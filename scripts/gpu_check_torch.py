#!/usr/bin/env python3
"""PyTorch's side of scripts/gpu-check: the device's bf16 matrix-product
peak, and F.scaled_dot_product_attention on the benchmark's shapes.

Reads the shapes from the cuda benchmark's JSON (so both time the same
thing) and writes a JSON of its own:

    gpu_check_torch.py BENCH_JSON OUT_JSON [--repeats=N]

The peak is an 8192^3 bf16 matrix product on random data. SDPA runs one
sequence at a time ([1, heads, len, head_dim], what a vision encoder without
varlen attention does), timed with CUDA events: warm-up, then the median of
the repeats. Exits 0 with {"available": false, "why": ...} when PyTorch or
its GPU is missing, so the check goes on without this column.
"""

import json
import statistics
import sys


def median_ms(run, repeats):
    import torch

    for _ in range(3):
        run()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    repeats = 20
    for arg in argv[3:]:
        if arg.startswith("--repeats="):
            repeats = int(arg.split("=", 1)[1])
    with open(argv[1]) as f:
        bench = json.load(f)
    out = {"available": False}
    try:
        import torch
        import torch.nn.functional as F

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
    except Exception as e:  # any import or driver failure: no column
        out["why"] = str(e)
        with open(argv[2], "w") as f:
            json.dump(out, f, indent=2)
        return 0

    out = {"available": True, "torch": torch.__version__, "shapes": []}
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: torch.matmul(a, b), repeats)
    out["bf16_peak_tflops"] = 2 * n**3 / (ms * 1e-3) / 1e12
    del a, b

    for shape in bench["shapes"]:
        heads, dim = shape["heads"], shape["head_dim"]
        tensors = []
        for length in shape["lengths"]:
            q, k, v = (
                torch.randn(1, heads, length, dim, device="cuda", dtype=torch.bfloat16)
                for _ in range(3)
            )
            tensors.append((q, k, v))

        def run():
            for q, k, v in tensors:
                F.scaled_dot_product_attention(q, k, v)

        out["shapes"].append({"name": shape["name"], "sdpa_ms": median_ms(run, repeats)})
        del tensors
        torch.cuda.empty_cache()
    with open(argv[2], "w") as f:
        json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

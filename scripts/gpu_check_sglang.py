#!/usr/bin/env python3
"""SGLang's side of scripts/gpu-check: SGLang 0.5.23's Triton prefill kernel
(context_attention_fwd, what its vision backend "triton_attn" launches),
compiled by the device's Triton and run on the benchmark's shapes: its
error against a float64 reference and its time, beside ours.

    gpu_check_sglang.py KERNEL_PY BENCH_JSON OUT_JSON [--repeats=N]

KERNEL_PY is the kernel's source file as the sglang wheel ships it
(sglang/kernels/ops/attention/prefill_attention.py; `scripts/gpu-check
build` copies it into the bundle). It imports sglang.srt.utils only for
is_cuda and is_hip: those two are given to it, answered by torch, so the
rest of SGLang need not be installed. Exits 0 with {"available": false,
"why": ...} when the file, torch or a GPU is missing.
"""

import importlib.util
import json
import sys
import types

from gpu_check_torch import median_ms  # the same timing as torch's kernels get


def load_kernel(path):
    import torch

    utils = types.ModuleType("sglang.srt.utils")
    utils.is_cuda = lambda: torch.version.cuda is not None and torch.cuda.is_available()
    utils.is_hip = lambda: torch.version.hip is not None
    for name in ("sglang", "sglang.srt"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["sglang.srt.utils"] = utils
    spec = importlib.util.spec_from_file_location("sglang_prefill_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def relative_error(q, k, v, o, lengths, scale, block_bytes=1 << 30):
    """||o - ref||_F / ||ref||_F, ref attention in float64 per sequence, in
    row blocks whose float64 scores stay under block_bytes."""
    import torch

    num, den, start = 0.0, 0.0, 0
    group = q.shape[1] // k.shape[1]
    for n in lengths:
        if n == 0:
            continue
        ks = k[start:start + n].double().transpose(0, 1).repeat_interleave(group, 0)
        vs = v[start:start + n].double().transpose(0, 1).repeat_interleave(group, 0)
        rows = max(1, min(n, block_bytes // (8 * q.shape[1] * n)))
        for r in range(start, start + n, rows):
            end = min(r + rows, start + n)
            qs = q[r:end].double().transpose(0, 1)
            ref = torch.softmax(qs @ ks.transpose(1, 2) * scale, dim=-1) @ vs
            got = o[r:end].double().transpose(0, 1)
            num += float(((got - ref) ** 2).sum())
            den += float((ref**2).sum())
        start += n
    return (num / den) ** 0.5 if den > 0 else float("nan")


def run_shape(kernel, heads, kv_heads, dim, lengths, dtype, repeats, time_it):
    import torch

    total = sum(lengths)
    q = torch.randn(total, heads, dim, device="cuda", dtype=dtype)
    k = torch.randn(total, kv_heads, dim, device="cuda", dtype=dtype)
    v = torch.randn(total, kv_heads, dim, device="cuda", dtype=dtype)
    o = torch.full_like(q, float("nan"))  # poisoned: rows never written stay NaN
    seq = torch.tensor(lengths, device="cuda", dtype=torch.int32)
    start = torch.zeros_like(seq)
    start[1:] = torch.cumsum(seq, 0)[:-1]
    scale = dim**-0.5

    def launch():
        kernel.context_attention_fwd(q, k, v, o, start, seq, max(lengths), is_causal=False,
                                     sm_scale=scale)

    launch()
    torch.cuda.synchronize()
    out = {"nan_rows": int(torch.isnan(o).any(dim=-1).any(dim=-1).sum()),
           "relative_error": relative_error(q, k, v, o, lengths, scale)}
    if time_it:
        out["ms"], _ = median_ms(launch, repeats, max_seconds=2.0)
    return out


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    repeats = 20
    for arg in argv[4:]:
        if arg.startswith("--repeats="):
            repeats = int(arg.split("=", 1)[1])
    out = {"available": False}
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        kernel = load_kernel(argv[1])
    except Exception as e:  # no file, no torch, no GPU, no Triton: no column
        out["why"] = f"{type(e).__name__}: {e}"
        with open(argv[3], "w") as f:
            json.dump(out, f, indent=2)
        print("sglang triton kernel: not run:", out["why"])
        return 0
    with open(argv[2]) as f:
        bench = json.load(f)
    import triton

    out = {"available": True, "triton": triton.__version__, "shapes": [], "edges": []}
    for shape in bench["shapes"]:
        entry = {"name": shape["name"]}
        try:
            entry.update(run_shape(kernel, shape["heads"], shape["heads"], shape["head_dim"],
                                   shape["lengths"], torch.bfloat16, repeats, time_it=True))
        except Exception as e:  # the kernel refused or failed: recorded
            entry["error"] = f"{type(e).__name__}: {e}"
        out["shapes"].append(entry)
        print("sglang triton kernel,", json.dumps(entry))
    # Small geometries the vision backends meet: fp16, grouped heads, an
    # empty sequence, a one-token sequence, head dims that are not powers of 2.
    edges = [("fp16, head dim 72", 16, 16, 72, [64, 100, 1], torch.float16),
             ("bf16, 4 query heads per kv head", 16, 4, 64, [256, 31], torch.bfloat16),
             ("bf16, an empty sequence", 8, 8, 80, [128, 0, 77], torch.bfloat16),
             ("fp32, head dim 80", 8, 8, 80, [200, 3], torch.float32)]
    for name, heads, kv_heads, dim, lengths, dtype in edges:
        entry = {"name": name}
        try:
            entry.update(run_shape(kernel, heads, kv_heads, dim, lengths, dtype, repeats,
                                   time_it=False))
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        out["edges"].append(entry)
        print("sglang triton kernel,", json.dumps(entry))
    with open(argv[3], "w") as f:
        json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

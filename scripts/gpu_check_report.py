#!/usr/bin/env python3
"""Writes scripts/gpu-check's report, OUT/gpu-check.md, from what its steps
left in OUT: steps.tsv (one line per step: name, PASS/FAIL/SKIP, seconds,
detail), bench.json (varlen_cuda_bench) and torch.json (gpu_check_torch.py).

    gpu_check_report.py OUT [--gpu=NAME] [--driver=VERSION] [--commit=SHA]

Standard library only: it also runs where PyTorch does not.
"""

import datetime
import json
import os
import sys


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_steps(path):
    steps = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4:
                    steps.append(parts)
    except OSError:
        pass
    return steps


def report(out, gpu, driver, commit):
    steps = read_steps(os.path.join(out, "steps.tsv"))
    bench = load_json(os.path.join(out, "bench.json")) or {}
    torch = load_json(os.path.join(out, "torch.json")) or {"available": False}
    peak = torch.get("bf16_peak_tflops") if torch.get("available") else None
    lines = [
        "# The cuda and cudnn backends on a GPU",
        "",
        f"Written by `scripts/gpu-check` on {datetime.date.today().isoformat()}.",
        "",
        f"- GPU: {bench.get('gpu', gpu or 'unknown')} (sm_{bench.get('sm', '?')}), driver {driver or 'unknown'}",
        f"- commit: {commit or 'unknown'}",
    ]
    if peak:
        lines.append(
            f"- bf16 peak: {peak:.0f} TFLOP/s (an 8192^3 matrix product through PyTorch "
            f"{torch.get('torch', '')}, random data, median of the repeats)"
        )
    else:
        lines.append(f"- bf16 peak: not measured ({torch.get('why', 'no PyTorch')})")
    lines += ["", "## Correctness", "", "| step | result | seconds | detail |", "|---|---|---|---|"]
    for name, status, seconds, detail in steps:
        lines.append(f"| {name} | {status} | {seconds} | {detail} |")
    lines += [
        "",
        "## Throughput (bfloat16, 16 heads, each kernel alone, CUDA events, median)",
        "",
        "cuda is our kernel; cudnn is cuDNN's SDPA graph (ragged offsets, padding mask) "
        "on the same shapes and data layout; the ratios are times measured side by side "
        "in one run (below 1: ours is faster). max |cuda - cudnn| compares the two "
        "backends' outputs of the same case data."
        + (f" cuDNN not run: {bench['cudnn']}." if bench.get("cudnn") else ""),
        "",
        "| shape | cuda correct | cuda ms | TFLOP/s | % of peak | cudnn correct | cudnn ms "
        "| cuda time / cudnn time | max \\|cuda - cudnn\\| | torch SDPA ms | cuda time / SDPA time |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    sdpa = {s["name"]: s["sdpa_ms"] for s in torch.get("shapes", [])}
    for s in bench.get("shapes", []):
        ms, tflops = s["ms"], s["tflops"]
        frac = f"{100 * tflops / peak:.1f} %" if peak and ms > 0 else "n/a"
        torch_ms = sdpa.get(s["name"])
        ratio = f"{ms / torch_ms:.2f}" if torch_ms and ms > 0 else "n/a"
        c = s.get("cudnn") or {}
        if c:
            cudnn_cells = (
                f"{'PASS' if c['correct'] else 'FAIL: ' + c['error']} | {c['ms']:.3f} | "
                + (f"{c['our_time_over_cudnn']:.2f}" if c["our_time_over_cudnn"] > 0 else "n/a")
                + " | "
                + (f"{c['max_difference_from_cuda']:.3g}"
                   if c.get("max_difference_from_cuda") is not None else "n/a")
            )
        else:
            cudnn_cells = "n/a | n/a | n/a | n/a"
        lines.append(
            f"| {s['name']} | {'PASS' if s['correct'] else 'FAIL: ' + s['error']} | "
            f"{ms:.3f} | {tflops:.1f} | {frac} | {cudnn_cells} | "
            f"{f'{torch_ms:.3f}' if torch_ms else 'n/a'} | {ratio} |"
        )
    if not bench:
        lines.append("| (the benchmark did not run) | | | | | | | | | | |")
    lines.append("")
    path = os.path.join(out, "gpu-check.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    options = dict(a[2:].split("=", 1) for a in argv[2:] if a.startswith("--") and "=" in a)
    print(report(argv[1], options.get("gpu"), options.get("driver"), options.get("commit")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

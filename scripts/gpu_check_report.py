#!/usr/bin/env python3
"""Writes scripts/gpu-check's report, OUT/gpu-check.md, from what its steps
left in OUT: steps.tsv (one line per step: name, PASS/FAIL/SKIP, seconds,
detail), bench.json (varlen_cuda_bench) and torch.json (gpu_check_torch.py):
the steps, our kernel's and cuDNN's throughput beside PyTorch's SDPA, and,
where torch.json has them, PyTorch's varlen kernels (FA2, memory-efficient,
cuDNN, varlen_attn) on the same shapes with their errors against float64;
then SGLang's Triton kernel (sglang.json, gpu_check_sglang.py) and real
device faults through supervised runs (faults.json, tests/run/gpu_faults.py).

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


# torch.json's kernel ids, in column order, and their names in the report.
TORCH_KERNELS = (
    ("sdpa", "SDPA per sequence"),
    ("flash_varlen", "FA2 varlen"),
    ("efficient_varlen", "mem-efficient varlen"),
    ("cudnn_varlen", "cuDNN varlen"),
    ("varlen_attn", "varlen_attn"),
)


def cell_text(text, limit=300):
    """One line, no column breaks, bounded: an exception's text in a cell."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Notes:
    """Numbered notes below a table, so long texts keep the cells short;
    the same text gets the same number."""

    def __init__(self):
        self.texts = []

    def ref(self, text):
        text = cell_text(text)
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def lines(self):
        return [""] + [f"{i + 1}. {t}" for i, t in enumerate(self.texts)] if self.texts else []


def time_cell(entry, notes):
    if not entry:
        return "n/a"
    if "absent" in entry:
        return "absent " + notes.ref(entry["absent"])
    if entry.get("ms") is not None:
        return f"{entry['ms']:.3f}"
    if "error" in entry:
        return "error " + notes.ref(entry["error"])
    if "skipped" in entry:
        return "not timed " + notes.ref(entry["skipped"])
    return "n/a"


def error_cell(entry, notes):
    if not entry:
        return "n/a"
    if "absent" in entry:
        return "absent " + notes.ref(entry["absent"])
    if "error" in entry and "rel_error" not in entry:
        return "error " + notes.ref(entry["error"])
    if "rel_error" not in entry:
        return "not checked " + notes.ref(entry.get("check_error", "no figures"))
    text = f"{'PASS' if entry.get('correct') else 'FAIL'} {entry['rel_error']:.2e}"
    flaws = []
    if entry.get("nonfinite"):
        flaws.append(f"{entry['nonfinite']} non-finite")
    if entry.get("unwritten_rows"):
        flaws.append(f"{entry['unwritten_rows']} rows unwritten")
    if entry.get("poisoned") is False:
        flaws.append("poison missed")
    if flaws:
        text += " (" + ", ".join(flaws) + ")"
    if "error" in entry:  # checked, then failed when timed
        text += "; timing: error " + notes.ref(entry["error"])
    return text


def torch_kernel_lines(bench, torch):
    """PyTorch's own kernels on the benchmark's shapes: times, our time over
    cuDNN's and over torch's FA2 varlen, and each output's error. Nothing
    where torch.json has no such figures (missing, unavailable, or written
    before they were measured)."""
    if not torch.get("available"):
        return []
    shapes = [t for t in torch.get("shapes", []) if "kernels" in t or "error" in t]
    if not shapes:
        return []
    ours = {s["name"]: s for s in bench.get("shapes", [])}
    versions = f"PyTorch {torch.get('torch', '?')}"
    if torch.get("cuda"):
        versions += f", CUDA {torch['cuda']}"
    cudnn = torch.get("cudnn")
    if isinstance(cudnn, int):
        versions += f", cuDNN {cudnn}"
    elif cudnn:  # the text of what cudnn.version() raised
        versions += f", cuDNN not usable ({cell_text(cudnn, 200)})"
    prefers = torch.get("varlen_attn_prefers_cudnn")
    route = {True: "cuDNN's", False: "FA2's"}.get(prefers)
    bound = torch.get("error_bound", 2e-2)
    lines = [
        "",
        "## PyTorch's attention kernels on the same shapes (bfloat16, CUDA events, median)",
        "",
        f"{versions}. Packed q, k, v of [tokens, heads, head_dim] and int32 cu_seqlens on the "
        "device, non-causal, scale 1/sqrt(head_dim), called as the aten ops "
        "`_flash_attention_forward` (FA2 varlen), `_efficient_attention_forward` "
        "(mem-efficient varlen) and `_cudnn_attention_forward` (cuDNN varlen) and as "
        "`torch.nn.attention.varlen.varlen_attn`"
        + (f" (which takes {route} kernel here)" if route else "")
        + "; SDPA runs one sequence at a time. cuda and cudnn are the benchmark's columns "
        "above; the ratios are times (below 1: ours is faster).",
        "",
        "| shape | cuda ms | cudnn ms | " + " | ".join(f"torch {label} ms" for _, label in TORCH_KERNELS)
        + " | cuda time / cudnn time | cuda time / FA2 varlen time |",
        "|---|---|---|" + "---|" * len(TORCH_KERNELS) + "---|---|",
    ]
    notes = Notes()
    for t in shapes:
        kernels = t.get("kernels") or {k: {"error": t.get("error", "not run")} for k, _ in TORCH_KERNELS}
        s = ours.get(t["name"], {})
        ms = s.get("ms") or 0
        c = s.get("cudnn") or {}
        cudnn_ms = c.get("ms") or 0
        flash = kernels.get("flash_varlen") or {}
        flash_ms = flash.get("ms") or 0
        cells = [
            t["name"],
            f"{ms:.3f}" if ms > 0 else "n/a",
            f"{cudnn_ms:.3f}" if cudnn_ms > 0 else "n/a",
        ]
        cells += [time_cell(kernels.get(k), notes) for k, _ in TORCH_KERNELS]
        cells.append(f"{ms / cudnn_ms:.2f}" if ms > 0 and cudnn_ms > 0 else "n/a")
        cells.append(f"{ms / flash_ms:.2f}" if ms > 0 and flash_ms > 0 else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Their outputs against float64",
        "",
        "\\|out - ref\\|_F / \\|ref\\|_F, ref computed per sequence in float64 on the device "
        f"from the same bf16 inputs; PASS: no non-finite value, every row written and at most "
        f"{bound:.0e} (bf16 rounding of the output alone is about 2e-3). Rows: the output's "
        "memory is filled with NaN before the call, through the caching allocator, since "
        "none of these calls takes an output buffer; 'poison missed' where the output "
        "landed elsewhere, and unwritten rows could then go unseen.",
        "",
        "| shape | " + " | ".join(label for _, label in TORCH_KERNELS) + " |",
        "|---|" + "---|" * len(TORCH_KERNELS),
    ]
    for t in shapes:
        kernels = t.get("kernels") or {k: {"error": t.get("error", "not run")} for k, _ in TORCH_KERNELS}
        cells = [t["name"]] + [error_cell(kernels.get(k), notes) for k, _ in TORCH_KERNELS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += notes.lines()
    return lines


def sglang_lines(bench, sglang):
    """SGLang's Triton prefill kernel (gpu_check_sglang.py): error and time."""
    if not sglang:
        return []
    lines = ["", "## SGLang 0.5.23's Triton prefill kernel (context_attention_fwd)", ""]
    if not sglang.get("available"):
        return lines + [f"Not run: {cell_text(sglang.get('why', 'unknown'))}"]
    ours = {s["name"]: s["ms"] for s in bench.get("shapes", [])}
    notes = Notes()
    lines += [f"Compiled by Triton {sglang.get('triton', '?')} on the device; the error is "
              "||out - ref||_F / ||ref||_F against float64 attention of the same inputs; "
              "rows never written count as NaN rows (the output is poisoned).", "",
              "| shape | relative error | NaN rows | ms | cuda time / its time |",
              "|---|---|---|---|---|"]
    for e in sglang.get("shapes", []) + sglang.get("edges", []):
        if "error" in e:
            lines.append(f"| {e['name']} | error {notes.ref(e['error'])} | | | |")
            continue
        ms = e.get("ms")
        ratio = f"{ours[e['name']] / ms:.2f}" if ms and ours.get(e["name"]) else "n/a"
        lines.append(f"| {e['name']} | {e['relative_error']:.2e} | {e['nan_rows']} | "
                     f"{f'{ms:.3f}' if ms else 'n/a'} | {ratio} |")
    return lines + notes.lines()


def fault_lines(faults):
    """Real device faults through supervised runs (tests/run/gpu_faults.py)."""
    if not faults:
        return []
    lines = ["", "## Device faults in supervised runs", "",
             "The cuda backend with a planted device fault on a quarter of launches "
             "(tests/run/gpu_fault_backend_plugin.cc): `varlen repro` over a quarter of the "
             "corpus per fault, and `varlen check` on the smoke tier.", "",
             "| run | exit | faulted / cases | seconds | first fault |", "|---|---|---|---|---|"]
    for name, f in faults.get("faults", {}).items():
        count = (f"{f['faulted']} / {f['cases']}" if "cases" in f
                 else f"{f.get('failed', 0)} failed / {f.get('checks', 0)} checks")
        lines.append(f"| {name} | {f.get('exit')} | {count} | {f.get('seconds')} | "
                     f"{cell_text(f.get('first', ''), 200)} |")
    lines += ["", f"- kernel run-time limit (cudaDevAttrKernelExecTimeout): "
              f"{faults.get('kernel_exec_timeout')}",
              f"- device memory of a killed process back after: {faults.get('memory_return')}"]
    for problem in faults.get("problems", []):
        lines.append(f"- PROBLEM: {cell_text(problem)}")
    return lines


def verdict_text(entry):
    """A benchmark shape's verdict: judged against float64, or only timed."""
    if entry.get("correct") is None:
        return "not judged"
    return "PASS" if entry["correct"] else "FAIL: " + cell_text(entry.get("error", ""))


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
    sdpa = {s["name"]: s.get("sdpa_ms") for s in torch.get("shapes", [])}
    for s in bench.get("shapes", []):
        ms, tflops = s["ms"], s["tflops"]
        frac = f"{100 * tflops / peak:.1f} %" if peak and ms > 0 else "n/a"
        torch_ms = sdpa.get(s["name"])
        ratio = f"{ms / torch_ms:.2f}" if torch_ms and ms > 0 else "n/a"
        c = s.get("cudnn") or {}
        if c:
            cudnn_cells = (
                f"{verdict_text(c)} | {c['ms']:.3f} | "
                + (f"{c['our_time_over_cudnn']:.2f}" if c["our_time_over_cudnn"] > 0 else "n/a")
                + " | "
                + (f"{c['max_difference_from_cuda']:.3g}"
                   if c.get("max_difference_from_cuda") is not None else "n/a")
            )
        else:
            cudnn_cells = "n/a | n/a | n/a | n/a"
        lines.append(
            f"| {s['name']} | {verdict_text(s)} | "
            f"{ms:.3f} | {tflops:.1f} | {frac} | {cudnn_cells} | "
            f"{f'{torch_ms:.3f}' if torch_ms else 'n/a'} | {ratio} |"
        )
    if not bench:
        lines.append("| (the benchmark did not run) | | | | | | | | | | |")
    lines += torch_kernel_lines(bench, torch)
    lines += sglang_lines(bench, load_json(os.path.join(out, "sglang.json")))
    lines += fault_lines(load_json(os.path.join(out, "faults.json")))
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

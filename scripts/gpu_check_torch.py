#!/usr/bin/env python3
"""PyTorch's side of scripts/gpu-check: the device's bf16 matrix-product
peak, and PyTorch's own attention kernels on the benchmark's shapes, each
timed and each output checked against a float64 reference.

Reads the shapes from the cuda benchmark's JSON (so both time the same
thing) and writes a JSON of its own:

    gpu_check_torch.py BENCH_JSON OUT_JSON [--repeats=N] [--budget-s=S]

The peak is an 8192^3 bf16 matrix product on random data. Then, per shape,
on one set of random bf16 inputs (packed q, k, v of [tokens, heads,
head_dim], int32 cu_seqlens on the device, non-causal, scale 1/sqrt(D)):

  sdpa              F.scaled_dot_product_attention one sequence at a time
                    ([1, heads, len, head_dim], what a vision encoder without
                    varlen attention does)
  flash_varlen      aten._flash_attention_forward with cum_seq_q/k (FA2)
  efficient_varlen  aten._efficient_attention_forward with cu_seqlens_q/k
                    ([1, tokens, heads, head_dim])
  cudnn_varlen      aten._cudnn_attention_forward with cum_seq_q/k
  varlen_attn       torch.nn.attention.varlen.varlen_attn, where it exists

Each is timed with CUDA events: warm-up, then the median of the repeats
(fewer when one call is slow, so the whole run stays within about
--budget-s, 90 s by default; past the budget the remaining timings are
skipped and said so). Its output is checked first: the relative error
||out - ref||_F / ||ref||_F against attention computed per sequence in
float64 on the device from the same bf16 inputs (bf16 rounding of the
output alone is about 2e-3; the check passes up to 2e-2), the count of
non-finite values, and the rows left unwritten. None of these kernels takes
an output buffer, so the caching allocator is poisoned instead: blocks of
the output's size are filled with NaN and freed just before the call, and
the JSON says whether the output landed in one (a row still all NaN was
never written). A kernel that raises, or is missing, is recorded as
{"error": "Type: message"} or {"absent": why} and the run goes on. The
JSON is rewritten after every shape, so a run cut short keeps what it
measured. Exits 0 with {"available": false, "why": ...} when PyTorch or its
GPU is missing, so the check goes on without these columns.
"""

import inspect
import json
import math
import statistics
import sys
import time

# Beyond bf16's own rounding (a relative 2^-9 per output element) by a wide
# margin, and far below what one wrong row or sequence gives.
ERROR_BOUND = 2e-2

KERNELS = ("sdpa", "flash_varlen", "efficient_varlen", "cudnn_varlen", "varlen_attn")

# float64 scores of one reference block at most (bytes): the largest shapes
# would need tens of GB at once.
REFERENCE_BLOCK_BYTES = 1 << 30

# Time one kernel on one shape for about this long at most (after warm-up).
TIMING_SECONDS = 2.0


def median_ms(run, repeats, max_seconds=None):
    """Median of `repeats` CUDA-event timings after three warm-up calls.
    With max_seconds, fewer repeats (three at least) when the warm-up says
    that many would take longer; returns (median, repeats run)."""
    import torch

    begin = time.perf_counter()
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    if max_seconds is not None:
        per_call = (time.perf_counter() - begin) / 3
        if per_call > 0:
            repeats = max(3, min(repeats, int(max_seconds / per_call)))
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), repeats


def error_text(e):
    # The first lines are the message; torch appends C++ stack traces below.
    message = " ".join(str(e).strip().splitlines()[:3])
    return f"{type(e).__name__}: {message}"[:600]


def call_op(op, **kwargs):
    """Calls the op's default overload by argument name, so a release that
    moved or added arguments still binds ours, and one that renamed or
    dropped one says so with its schema instead of taking a value for the
    wrong argument."""
    overload = op.default
    names = {a.name for a in overload._schema.arguments}
    unknown = sorted(set(kwargs) - names)
    if unknown:
        raise TypeError(f"{overload._schema.name} has no argument {', '.join(unknown)}; "
                        f"its schema: {overload._schema}")
    return overload(**kwargs)


def attempt(f):
    """f(), or its exception's text: torch raises from cudnn.version() when
    the cuDNN it loads is not the one it was built with."""
    try:
        return f()
    except Exception as e:
        return error_text(e)


def first_tensor(result):
    return result[0] if isinstance(result, (tuple, list)) else result


def schemas():
    """The schemas of the ops called here, as this torch has them."""
    import torch

    out = {}
    for name in ("_flash_attention_forward", "_efficient_attention_forward",
                 "_cudnn_attention_forward"):
        try:
            out[name] = str(getattr(torch.ops.aten, name).default._schema)
        except Exception as e:  # absent in this release
            out[name] = error_text(e)
    try:
        from torch.nn.attention import varlen

        out["varlen_attn"] = str(inspect.signature(varlen.varlen_attn))
    except Exception as e:
        out["varlen_attn"] = error_text(e)
    return out


class Problem:
    """One shape's inputs: packed bf16 q, k, v [T, H, D] and int32 cu_seqlens."""

    def __init__(self, lengths, heads, dim, device, seed=0):
        import torch

        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        self.lengths = [int(n) for n in lengths]
        self.starts = [0]
        for n in self.lengths:
            self.starts.append(self.starts[-1] + n)
        self.tokens = self.starts[-1]
        self.heads, self.dim, self.device = heads, dim, device
        self.q, self.k, self.v = (
            torch.randn(self.tokens, heads, dim, device=device, dtype=torch.bfloat16,
                        generator=generator)
            for _ in range(3)
        )
        # int32, on the device: what every varlen kernel here requires.
        self.cu_seqlens = torch.tensor(self.starts, dtype=torch.int32, device=device)
        self.max_len = max(self.lengths)
        self.scale = 1.0 / math.sqrt(dim)
        self.flops = 4.0 * heads * dim * sum(n * n for n in self.lengths)

    def sequences(self):
        return [(s, s + n) for s, n in zip(self.starts, self.lengths) if n > 0]


def reference(p):
    """float64 attention per sequence, from the same bf16 inputs: plain
    matmul, softmax, matmul, in row blocks that bound the scores' memory."""
    import torch

    ref = torch.empty(p.tokens, p.heads, p.dim, dtype=torch.float64, device=p.device)
    for s, e in p.sequences():
        n = e - s
        k = p.k[s:e].double().transpose(0, 1)  # [H, n, D]
        v = p.v[s:e].double().transpose(0, 1)
        rows = max(1, min(n, REFERENCE_BLOCK_BYTES // (8 * p.heads * n)))
        for r in range(s, e, rows):
            q = p.q[r:min(r + rows, e)].double().transpose(0, 1)
            scores = torch.matmul(q, k.transpose(1, 2)) * p.scale
            ref[r:min(r + rows, e)] = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(0, 1)
            del scores
    return ref


class Kernel:
    """One kernel on one problem: run() calls it once and returns its output
    as [T, H, D]; checked() does the same on a poisoned allocator and says
    whether the output landed in poison (None where it cannot tell)."""

    def __init__(self, p, run):
        self.p, self.run = p, run

    def checked(self):
        ranges = poison_allocator(self.p.q.numel() * self.p.q.element_size(), self.p.device)
        out = self.run()
        return out, (landed(out, ranges) if ranges else None)


class SdpaKernel(Kernel):
    """F.scaled_dot_product_attention one sequence at a time, on contiguous
    [1, H, n, D] copies: the layout a per-sequence caller has."""

    def __init__(self, p):
        import torch.nn.functional as F

        self.p, self.sdpa = p, F.scaled_dot_product_attention
        self.inputs = [
            tuple(x[s:e].transpose(0, 1).unsqueeze(0).contiguous() for x in (p.q, p.k, p.v))
            for s, e in p.sequences()
        ]

    def one(self, q, k, v):
        return self.sdpa(q, k, v, scale=self.p.scale)

    def run(self):
        return [self.one(*qkv) for qkv in self.inputs]

    def checked(self):
        import torch

        outs, hits = [], []
        for q, k, v in self.inputs:  # one output per call: poison before each
            ranges = poison_allocator(q.numel() * q.element_size(), self.p.device)
            o = self.one(q, k, v)
            outs.append(o.squeeze(0).transpose(0, 1))
            if ranges:
                hits.append(landed(o, ranges))
        return torch.cat(outs, dim=0), (all(hits) if hits else None)


def landed(out, ranges):
    return any(lo <= out.data_ptr() < hi for lo, hi in ranges)


# Each maker: (p) -> a Kernel, or a string saying why this torch cannot run it.


def flash_varlen_kernel(p):
    import torch

    op = getattr(torch.ops.aten, "_flash_attention_forward", None)
    if op is None:
        return "torch has no aten._flash_attention_forward"

    def run():
        # -> (output [T, H, D], softmax_logsumexp, rng_state, unused, debug_attn_mask)
        return first_tensor(call_op(
            op, query=p.q, key=p.k, value=p.v, cum_seq_q=p.cu_seqlens, cum_seq_k=p.cu_seqlens,
            max_q=p.max_len, max_k=p.max_len, dropout_p=0.0, is_causal=False,
            return_debug_mask=False, scale=p.scale))

    return Kernel(p, run)


def efficient_varlen_kernel(p):
    import torch

    op = getattr(torch.ops.aten, "_efficient_attention_forward", None)
    if op is None:
        return "torch has no aten._efficient_attention_forward"
    # With cu_seqlens it takes one batch of all the tokens: [1, T, H, D].
    q, k, v = (x.unsqueeze(0) for x in (p.q, p.k, p.v))

    def run():
        # -> (output [1, T, H, D], logsumexp, philox_seed, philox_offset,
        #     max_seqlen_batch_q, max_seqlen_batch_k); custom_mask_type 0: no mask.
        out = first_tensor(call_op(
            op, query=q, key=k, value=v, bias=None, cu_seqlens_q=p.cu_seqlens,
            cu_seqlens_k=p.cu_seqlens, max_seqlen_q=p.max_len, max_seqlen_k=p.max_len,
            dropout_p=0.0, custom_mask_type=0, compute_log_sumexp=False, scale=p.scale))
        return out.squeeze(0)

    return Kernel(p, run)


def cudnn_varlen_kernel(p):
    import torch

    op = getattr(torch.ops.aten, "_cudnn_attention_forward", None)
    if op is None:
        return "torch has no aten._cudnn_attention_forward"
    if "cum_seq_q" not in {a.name for a in op.default._schema.arguments}:
        return ("aten._cudnn_attention_forward takes no cumulative sequence lengths here: "
                f"{op.default._schema}")

    def run():
        # -> (output [T, H, D], logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
        #     philox_seed, philox_offset, debug_attn_mask). The log-sum-exp is
        # asked for as torch's own varlen_attn asks for it: its ragged path.
        return first_tensor(call_op(
            op, query=p.q, key=p.k, value=p.v, attn_bias=None, cum_seq_q=p.cu_seqlens,
            cum_seq_k=p.cu_seqlens, max_q=p.max_len, max_k=p.max_len, compute_log_sumexp=True,
            dropout_p=0.0, is_causal=False, return_debug_mask=False, scale=p.scale))

    return Kernel(p, run)


def varlen_attn_kernel(p):
    try:
        from torch.nn.attention import varlen
    except Exception as e:
        return f"no torch.nn.attention.varlen ({error_text(e)})"
    if not hasattr(varlen, "varlen_attn"):
        return "torch.nn.attention.varlen has no varlen_attn"
    # scale is keyword-only where it exists; its default is 1/sqrt(D) anyway.
    kwargs = {"scale": p.scale} if "scale" in inspect.signature(varlen.varlen_attn).parameters else {}

    def run():
        return first_tensor(varlen.varlen_attn(
            p.q, p.k, p.v, p.cu_seqlens, p.cu_seqlens, p.max_len, p.max_len, **kwargs))

    return Kernel(p, run)


MAKERS = {
    "sdpa": SdpaKernel,
    "flash_varlen": flash_varlen_kernel,
    "efficient_varlen": efficient_varlen_kernel,
    "cudnn_varlen": cudnn_varlen_kernel,
    "varlen_attn": varlen_attn_kernel,
}


def poison_allocator(nbytes, device, blocks=2):
    """Leaves `blocks` freed blocks of nbytes, filled with NaN, in the caching
    allocator, which hands such a block to the next request of that size: a
    kernel's output most likely lands on NaN. Two, so that one smaller
    allocation taking part of one still leaves another whole. Returns their
    address ranges (none off CUDA)."""
    import torch

    if torch.device(device).type != "cuda":
        return []
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # only these blocks are then cached
    held = [torch.full((nbytes // 2,), float("nan"), dtype=torch.bfloat16, device=device)
            for _ in range(blocks)]
    ranges = [(t.data_ptr(), t.data_ptr() + nbytes) for t in held]
    del held
    return ranges


def check_output(p, kernel, ref):
    """Runs the kernel once on a poisoned allocator and judges its output."""
    import torch

    out, hit = kernel.checked()
    if torch.device(p.device).type == "cuda":
        torch.cuda.synchronize()  # a fault is this kernel's
    want = (p.tokens, p.heads, p.dim)
    if tuple(out.shape) != want:
        raise RuntimeError(f"output of shape {tuple(out.shape)}, expected {want}")
    finite = torch.isfinite(out)
    result = {
        "nonfinite": int((~finite).sum()),
        # A (token, head) row all NaN was never written, where the output was poisoned.
        "unwritten_rows": int(torch.isnan(out).all(dim=-1).sum()),
        "poisoned": hit,
    }
    # The error of the finite values; the others are counted above.
    zero = torch.zeros((), dtype=torch.float64, device=out.device)
    diff = torch.where(finite, out.double(), zero) - ref
    ref_norm = float(torch.linalg.vector_norm(ref))
    result["rel_error"] = (float(torch.linalg.vector_norm(diff)) / ref_norm
                           if ref_norm > 0 else float("nan"))
    result["max_abs_error"] = float(diff.abs().max())
    result["correct"] = (result["nonfinite"] == 0 and result["unwritten_rows"] == 0
                         and result["rel_error"] <= ERROR_BOUND)
    return result


def measure_shape(p, repeats, deadline, log=print, timer=median_ms):
    """Every kernel on one problem: {"reference": ..., "kernels": {id: ...}}."""
    import torch

    shape = {"tokens": p.tokens, "sequences": len(p.lengths), "kernels": {}}
    begin = time.perf_counter()
    try:
        ref = reference(p)
        if torch.device(p.device).type == "cuda":
            torch.cuda.synchronize()
        shape["reference"] = {"seconds": round(time.perf_counter() - begin, 3)}
    except Exception as e:
        ref = None
        shape["reference"] = {"error": error_text(e)}
    for name in KERNELS:
        entry = {}
        try:
            kernel = MAKERS[name](p)
            if isinstance(kernel, str):
                entry["absent"] = kernel
            else:
                # Checked before it is timed, on fresh poison: timing leaves
                # correct outputs of its own behind in freed blocks.
                if ref is None:
                    entry["check_error"] = "no reference: " + shape["reference"]["error"]
                else:
                    entry.update(check_output(p, kernel, ref))
                if time.perf_counter() > deadline:
                    entry["skipped"] = "the run's time budget is spent"
                else:
                    ms, done = timer(kernel.run, repeats,
                                     min(TIMING_SECONDS, deadline - time.perf_counter()))
                    entry.update(ms=ms, repeats=done,
                                 tflops=p.flops / (ms * 1e-3) / 1e12 if ms > 0 else 0.0)
        except Exception as e:  # raised by the kernel, or by checking its output
            entry["error"] = error_text(e)
        shape["kernels"][name] = entry
        log(f"  {name}: {summary(entry)}")
        release(p.device)
    return shape


def release(device):
    """Returns cached blocks between kernels, so one's leftovers do not
    crowd the next; quietly, since after a device fault every call raises
    and that is already recorded."""
    import torch

    if torch.device(device).type == "cuda":
        try:
            torch.cuda.empty_cache()
        except Exception:
            pass


def summary(entry):
    if "absent" in entry:
        return "absent (" + entry["absent"] + ")"
    parts = []
    if "ms" in entry:
        parts.append(f"{entry['ms']:.3f} ms ({entry['tflops']:.1f} TFLOP/s, "
                     f"{entry['repeats']} repeats)")
    if "skipped" in entry:
        parts.append("not timed: " + entry["skipped"])
    if "rel_error" in entry:
        written = ("rows all written" if entry["unwritten_rows"] == 0
                   else f"{entry['unwritten_rows']} rows unwritten")
        poison = {True: "poisoned", False: "poison missed", None: "not poisoned"}[entry["poisoned"]]
        parts.append(f"rel error {entry['rel_error']:.2e}, {entry['nonfinite']} non-finite, "
                     f"{written} ({poison}): {'PASS' if entry['correct'] else 'FAIL'}")
    if "check_error" in entry:
        parts.append("not checked: " + entry["check_error"])
    if "error" in entry:
        parts.append("error: " + entry["error"])
    return "; ".join(parts)


def write(path, out):
    with open(path, "w") as f:
        json.dump(out, f, indent=2)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    repeats, budget = 20, 90.0
    for arg in argv[3:]:
        if arg.startswith("--repeats="):
            repeats = int(arg.split("=", 1)[1])
        elif arg.startswith("--budget-s="):
            budget = float(arg.split("=", 1)[1])
    start = time.perf_counter()
    with open(argv[1]) as f:
        bench = json.load(f)
    out = {"available": False}
    try:
        import torch
        import torch.nn.functional  # noqa: F401

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
    except Exception as e:  # any import or driver failure: no column
        out["why"] = str(e)
        write(argv[2], out)
        return 0

    out = {
        "available": True,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": attempt(torch.backends.cudnn.version),
        "device": torch.cuda.get_device_name(0),
        "error_bound": ERROR_BOUND,
        "schemas": schemas(),
        "shapes": [],
    }
    try:
        # Which kernel varlen_attn runs, as far as this torch says (releases
        # that can take cuDNN decide per device).
        from torch.nn.attention import varlen

        out["varlen_attn_prefers_cudnn"] = bool(varlen._should_use_cudnn(0))
    except Exception:
        out["varlen_attn_prefers_cudnn"] = None
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms, _ = median_ms(lambda: torch.matmul(a, b), repeats)
    out["bf16_peak_tflops"] = 2 * n**3 / (ms * 1e-3) / 1e12
    del a, b
    print(f"torch {torch.__version__} on {out['device']}: "
          f"bf16 peak {out['bf16_peak_tflops']:.0f} TFLOP/s")
    write(argv[2], out)

    deadline = start + budget
    for shape in bench["shapes"]:
        print(shape["name"])
        entry = {"name": shape["name"]}
        try:
            p = Problem(shape["lengths"], shape["heads"], shape["head_dim"], "cuda")
            entry.update(measure_shape(p, repeats, deadline))
            del p
        except Exception as e:  # the shape's inputs could not be made
            entry["error"] = error_text(e)
            print("  error: " + entry["error"])
        # The column the report has always read.
        entry["sdpa_ms"] = entry.get("kernels", {}).get("sdpa", {}).get("ms")
        out["shapes"].append(entry)
        write(argv[2], out)
        release("cuda")
    print(f"torch kernels: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

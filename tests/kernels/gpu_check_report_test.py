"""Tests of scripts/gpu_check_report.py, the device check's report: it must
render what a device run leaves (shapes judged or only timed, kernels that
raised or are absent, SGLang's kernel, device faults) and what a cut-short
run leaves, without a GPU."""

import importlib.util
import json
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check_report.py"
spec = importlib.util.spec_from_file_location("gpu_check_report", SCRIPT)
gpu_check_report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check_report)


def shape(name, ms, correct, cudnn_ms):
    error = "0.0019 (0.0116)" if correct is not None else "not judged: 4096 tokens"
    return {"name": name, "lengths": [1024], "heads": 16, "head_dim": 80, "correct": correct,
            "error": error, "ms": ms, "tflops": 6.4, "fraction_of_peak": 0.0, "timing_error": "",
            "cudnn": {"correct": correct, "error": error, "ms": cudnn_ms, "tflops": 160.0,
                      "our_time_over_cudnn": ms / cudnn_ms, "max_difference_from_cuda": None,
                      "timing_error": ""}}


def kernel(ms, correct=True):
    return {"nonfinite": 0, "unwritten_rows": 0, "poisoned": True, "rel_error": 2.2e-3,
            "max_abs_error": 1e-3, "correct": correct, "ms": ms, "repeats": 20}


class ReportTest(unittest.TestCase):
    def render(self, files, steps=""):
        with tempfile.TemporaryDirectory() as out:
            for name, content in files.items():
                Path(out, name).write_text(json.dumps(content))
            Path(out, "steps.tsv").write_text(steps)
            path = gpu_check_report.report(out, "NVIDIA H200", "580", "abc1234")
            return Path(path).read_text()

    def test_a_whole_run(self):
        bench = {"gpu": "NVIDIA H200", "sm": "90", "shapes": [
            shape("1k", 0.8, True, 0.04), shape("4k", 13.0, None, 0.25)]}
        torch = {"available": True, "torch": "2.11.0", "bf16_peak_tflops": 780.0, "shapes": [
            {"name": "1k", "sdpa_ms": 0.035, "kernels": {
                "sdpa": kernel(0.035), "flash_varlen": kernel(0.08),
                "efficient_varlen": {"error": "RuntimeError: no | kernel"},
                "cudnn_varlen": kernel(41.0), "varlen_attn": {"absent": "torch has none"}}},
            {"name": "4k", "sdpa_ms": 0.23, "kernels": {"flash_varlen": kernel(0.4, False)}}]}
        sglang = {"available": True, "triton": "3.6.0",
                  "shapes": [{"name": "1k", "relative_error": 2.3e-3, "nan_rows": 0, "ms": 0.07}],
                  "edges": [{"name": "an empty sequence", "error": "ValueError: bad"}]}
        faults = {"faults": {"illegal_address": {"exit": 1, "cases": 81, "faulted": 3, "named": 3,
                                                 "seconds": 3.0, "first": "c: cudaErrorIllegalAddress"}},
                  "kernel_exec_timeout": 0, "memory_return": {"seconds": 0.1, "held_mib": 8807},
                  "problems": ["spin: no case faulted"]}
        text = self.render({"bench.json": bench, "torch.json": torch, "sglang.json": sglang,
                            "faults.json": faults},
                           "benchmark\tPASS\t54\t\ncompute-sanitizer memcheck\tPASS\t1\t0 errors\n")
        self.assertIn("- GPU: NVIDIA H200 (sm_90), driver 580", text)
        self.assertIn("- bf16 peak: 780 TFLOP/s", text)
        self.assertIn("| compute-sanitizer memcheck | PASS | 1 | 0 errors |", text)
        # A shape only timed is said so, never a failure.
        self.assertIn("| 4k | not judged | 13.000 |", text)
        self.assertNotIn("FAIL: not judged", text)
        # Our time over FA2 varlen's: 0.8 / 0.08.
        self.assertIn("10.00", text)
        self.assertIn("RuntimeError: no \\| kernel", text)
        self.assertIn("torch has none", text)
        self.assertIn("## SGLang 0.5.23's Triton prefill kernel", text)
        self.assertIn("| 1k | 2.30e-03 | 0 | 0.070 | 11.43 |", text)
        self.assertIn("ValueError: bad", text)
        self.assertIn("## Device faults in supervised runs", text)
        self.assertIn("| illegal_address | 1 | 3 / 81 | 3.0 | c: cudaErrorIllegalAddress |", text)
        self.assertIn("- PROBLEM: spin: no case faulted", text)
        # Every row of a table has its header's columns (escaped bars aside).
        columns = None
        for line in text.splitlines():
            if not line.startswith("|"):
                columns = None
                continue
            bars = line.replace("\\|", "").count("|")
            columns = columns or bars
            self.assertEqual(bars, columns, line)

    def test_a_run_cut_short(self):
        text = self.render({"torch.json": {"available": False, "why": "torch sees no CUDA device"}})
        self.assertIn("bf16 peak: not measured (torch sees no CUDA device)", text)
        self.assertIn("(the benchmark did not run)", text)
        self.assertNotIn("SGLang", text)
        self.assertNotIn("Device faults", text)


if __name__ == "__main__":
    sys.exit(unittest.main())

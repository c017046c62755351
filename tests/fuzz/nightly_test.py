"""Tests of scripts/nightly's parts that need no fuzzer: crash signatures,
the case a violation prints, the report."""

import importlib.machinery
import importlib.util
import sys
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "nightly"
loader = importlib.machinery.SourceFileLoader("nightly", str(SCRIPT))
spec = importlib.util.spec_from_loader("nightly", loader)
nightly = importlib.util.module_from_spec(spec)
loader.exec_module(nightly)

SRC = nightly.ROOT


def frame(n, function, where):
    return f"    #{n} 0x55d5{n:04x} in {function} {where}"


VIOLATION = "\n".join([
    "INFO: Running with entropic power schedule (0xFF, 100).",
    "==varlen== property violated: hardened-silent-corruption",
    "hardened mode let the call through to a wrong launch or output",
    "==varlen== case begin",
    '{"name": "decoded", "mode": "hardened"}',
    "==varlen== case end",
    "==123== ERROR: libFuzzer: deadly signal",
    frame(0, "__sanitizer_print_stack_trace", "(/x/contract_fuzzer+0x1)"),
    frame(1, "fuzzer::PrintStackTrace()", "(/x/contract_fuzzer+0x2)"),
    frame(2, "__pthread_kill_implementation", "nptl/pthread_kill.c:44:76"),
    frame(3, "abort", "stdlib/abort.c:79:7"),
    frame(4, "varlen::ReportViolation(absl::string_view, absl::string_view)",
          f"{SRC}/fuzz/violation.cc:19:3"),
    frame(5, "LLVMFuzzerTestOneInput", f"{SRC}/fuzz/contract_fuzzer.cc:116:7"),
    frame(6, "fuzzer::Fuzzer::ExecuteCallback(unsigned char const*, unsigned long)",
          "(/x/contract_fuzzer+0x3)"),
    "",
    "NOTE: libFuzzer has rudimentary signal handlers.",
])

USE_AFTER_FREE = "\n".join([
    "==9==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020 at pc 0x55 bp 0x7f",
    "READ of size 8 at 0x6020 thread T0",
    frame(0, "varlen::Value::kind() const", f"{SRC}/lib/include/varlen/core/value.h:65:50"),
    frame(1, "std::vector<int, std::allocator<int> >::size() const",
          "/usr/include/c++/12/bits/stl_vector.h:919:40"),
    frame(2, "varlen::internal::ResolveList(varlen::ResolveContext const&)",
          f"{SRC}/lib/contract/resolve_common.cc:208:3"),
    frame(3, "varlen::Resolve(varlen::AttentionCall const&, varlen::Profile, varlen::Mode)",
          f"{SRC}/lib/contract/resolve.cc:40:1"),
    frame(4, "LLVMFuzzerTestOneInput", f"{SRC}/fuzz/contract_fuzzer.cc:100:3"),
    "",
    "freed by thread T0 here:",
    frame(0, "operator delete(void*)", "(/x/contract_fuzzer+0x4)"),
    frame(1, "varlen::Other()", f"{SRC}/lib/contract/other.cc:1:1"),
])

UBSAN = "\n".join([
    f"{SRC}/kernels/cpu_reference/reference.cc:88:31: runtime error: signed integer overflow: "
    "9223372036854775807 + 1 cannot be represented in type 'long'",
    frame(0, "varlen::SequenceAt(varlen::VarlenAttentionParams const&, long)",
          f"{SRC}/lib/backend/params.cc:88:31"),
    frame(1, "LLVMFuzzerTestOneInput", f"{SRC}/fuzz/contract_fuzzer.cc:100:3"),
])


class SignatureTest(unittest.TestCase):
    def test_violation_is_named_by_its_property(self):
        kind, frames = nightly.signature_of(VIOLATION)
        self.assertEqual(kind, "violation: hardened-silent-corruption")
        self.assertEqual(frames, ["LLVMFuzzerTestOneInput"])

    def test_sanitizer_report_keeps_our_top_three_frames_of_the_first_stack(self):
        kind, frames = nightly.signature_of(USE_AFTER_FREE)
        self.assertEqual(kind, "AddressSanitizer: heap-use-after-free")
        self.assertEqual(frames, ["varlen::Value::kind", "varlen::internal::ResolveList",
                                  "varlen::Resolve"])

    def test_ubsan_kind_drops_the_values(self):
        kind, frames = nightly.signature_of(UBSAN)
        self.assertEqual(kind, "UndefinedBehaviorSanitizer: signed integer overflow")
        self.assertEqual(frames, ["varlen::SequenceAt", "LLVMFuzzerTestOneInput"])

    def test_same_bug_from_other_inputs_has_one_signature(self):
        other = VIOLATION.replace("116:7", "131:5").replace("0x55d5", "0x66e6")
        self.assertEqual(nightly.signature_of(other), nightly.signature_of(VIOLATION))

    def test_unknown_output(self):
        self.assertEqual(nightly.signature_of("killed"), ("unknown crash", []))


class CaseTest(unittest.TestCase):
    def test_case_between_markers(self):
        self.assertEqual(nightly.case_from_output(VIOLATION),
                         {"name": "decoded", "mode": "hardened"})

    def test_no_case(self):
        self.assertIsNone(nightly.case_from_output(USE_AFTER_FREE))


class ReportTest(unittest.TestCase):
    def test_markdown_lists_targets_and_findings(self):
        report = {
            "date": "2026-12-01T03:00:00", "preset": "fuzz", "budget_s": 300, "jobs": 2,
            "new_signatures": 1,
            "targets": [{
                "target": "contract",
                "fuzz": {"seconds": 60, "executions": 1000, "exec_per_s": 16},
                "coverage_before": {"edges": 10}, "coverage_after": {"edges": 12,
                                                                     "features": 30},
                "corpus_before": {"files": 3}, "corpus_after": {"files": 5},
                "crash_files": 4,
                "signatures": [{"target": "contract", "type": "violation: x", "frames": ["f"],
                                "new": True, "inputs": 4, "input_bytes": 9,
                                "fuzzer_repro": "fz in", "repro": "varlen repro c.json",
                                "repro_fails": True}],
            }],
        }
        text = nightly.markdown(report)
        self.assertIn("| contract | 60 | 1000 | 16 | 10 → 12 | 30 | 3 → 5 | 4 | 1 |", text)
        self.assertIn("1 new signature(s).", text)
        self.assertIn("`varlen repro c.json` (fails, as the fuzz run did)", text)


if __name__ == "__main__":
    sys.argv[1:1] = ["-v"] if "-v" in sys.argv else []
    unittest.main()

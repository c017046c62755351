// File: varlen/backend/fault.h
// -----------------------------------------------------------------------------
//
// A fault is what a backend does instead of returning: it crashes, hangs,
// runs out of memory, ends its process, writes outside the buffers it was
// given, or changes an input in place. The supervisor (varlen/run) sees it
// from outside the worker process that ran the backend and hands it back as
// the status of the call, so every layer that passes a backend's status on
// keeps it: a fault is a failing case with its case file, whatever the case
// expected, and never the end of the run.

#ifndef VARLEN_BACKEND_FAULT_H_
#define VARLEN_BACKEND_FAULT_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace varlen {

enum class FaultKind {
  kCrash,         // killed by a signal, or exited with a nonzero status mid-call
  kTimeout,       // no answer within the call's deadline
  kOom,           // over the worker's memory limit
  kVanished,      // exited with status 0 mid-call
  kWriteOutside,  // wrote into the guard band around a buffer
  kInputChanged,  // changed q, k, v or the launch's arrays in place
};

// "CRASH", "TIMEOUT", "OOM", "VANISHED", "WRITE_OUTSIDE", "INPUT_CHANGED".
absl::string_view FaultKindName(FaultKind kind);
std::optional<FaultKind> ParseFaultKind(absl::string_view name);

struct Fault {
  FaultKind kind = FaultKind::kCrash;
  // One line: "signal 11 (SIGSEGV)", "no answer within 30.0 s", ...
  std::string summary;
  // The last lines the worker wrote to stdout and stderr during the call
  // (the backend's own traceback, a sanitizer report, a CUDA error name).
  std::string log_tail;
};

// "CRASH: signal 11 (SIGSEGV) while ...", then the log tail, indented.
std::string DescribeFault(const Fault& fault);

// What a thousand faults of one bug share, so that reports count them as
// one group: the kind, the summary where it names the cause (a signal, an
// exit status; not a deadline or a size, which vary by case), and the
// innermost frame the log shows (a sanitizer's "#0" line, the last line of
// a Python traceback's frames and its exception type).
std::string FaultSignature(const Fault& fault);

// A status (Internal, "<KIND>: <summary>") that carries `fault`.
absl::Status FaultStatus(const Fault& fault);
// The fault `status` carries, or nullopt.
std::optional<Fault> FaultOf(const absl::Status& status);

}  // namespace varlen

#endif  // VARLEN_BACKEND_FAULT_H_

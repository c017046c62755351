// File: varlen/run/isolation.h
// -----------------------------------------------------------------------------
//
// Supervised runs: the backend under test runs in a worker process, and the
// process the user started (the supervisor) generates, shrinks, judges and
// reports without running backend code. A backend that crashes, hangs, runs
// out of memory, ends its process or writes where it must not is then a
// fault (varlen/backend/fault.h) charged to the call that caused it, and the
// run goes on with a fresh worker.
//
// Isolate() wraps a backend in a proxy that every front end uses like any
// other Backend. Each Supports() and Run() goes to the worker: the launch's
// tensors and arrays are copied into shared memory, each between two guard
// bands; afterwards the guard bands must be intact and the inputs unchanged,
// and the output is copied back. The supervisor owns the deadline (it kills
// the worker's process group) and the memory limit (it watches the
// worker's resident set).
//
// Workers are started by re-executing a program (fork+exec: safe after
// CUDA or threads have started), by default this one with its own
// arguments; every main that isolates backends starts with
//
//   if (varlen::IsWorkerProcess()) return varlen::ServeAsWorker(find);
//
// after registering its backends. Declarations (name, capabilities,
// Available) and a backend's own argument handling (ResolveCall) and
// engine calls (CallEngine) stay in the supervisor.

#ifndef VARLEN_RUN_ISOLATION_H_
#define VARLEN_RUN_ISOLATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "varlen/backend/backend.h"

namespace varlen {

struct IsolationOptions {
  // The worker's command line (argv[0] is the program); empty: this
  // program, with this process's arguments.
  std::vector<std::string> worker_command;
  // "NAME=value" entries set in the worker's environment, over this
  // process's own (an interpreter's module path).
  std::vector<std::string> worker_environment;
  // A call's deadline: this floor, or `deadline_factor` times the time the
  // slowest call so far took per multiply-add, whichever is longer.
  double deadline_floor_s = 60;
  double deadline_factor = 20;
  // The worker's resident memory limit; 0: half of this machine's memory.
  int64_t memory_limit_mb = 0;
};

// A backend whose calls run in a worker process serving `backend` (found
// there by name). REQUIRES: `backend` outlives the result.
std::unique_ptr<Backend> Isolate(const Backend& backend, IsolationOptions options = {});

// True in a process started as a worker.
bool IsWorkerProcess();

// Serves the supervisor's calls on the backend that `find_backend` returns
// for the name the supervisor gave, until the supervisor closes the pipe.
// Returns the process's exit status.
int ServeAsWorker(absl::FunctionRef<const Backend*(absl::string_view)> find_backend);

}  // namespace varlen

#endif  // VARLEN_RUN_ISOLATION_H_

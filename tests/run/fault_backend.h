// A backend that is right except on some launches, where it faults the way
// new backends do; built into a conformance binary (fault_backend_main.cc)
// and as a plugin for `varlen check --load=` (fault_backend_plugin.cc). The
// fault is chosen by VARLEN_TEST_FAULT:
//
//   none                right everywhere (the fault-free baseline)
//   segfault            a store through a null pointer
//   abort               abort(), as a failed device-side assert ends a process
//   exit0               _Exit(0) mid-call, as a library calling exit() does
//   exit3               _Exit(3) mid-call
//   hang                never returns
//   oom                 allocates and touches memory until it is stopped
//   thread_throw        an exception escapes another thread (std::terminate)
//   write_past_output   stores 4 bytes past the end of the output
//   scale_q_in_place    scales q in place, then computes
//   flaky               abort() on a faulty launch one time in two, at random
//   device_lost         as a GPU kernel reading an illegal address: the call
//                       returns at once (the launch is asynchronous), the
//                       error surfaces when the device is next asked
//                       (DeviceHealth), and every later call fails with it,
//                       as every CUDA call of a process does after one
//
// The faulty launches are those whose computed query rows, summed over the
// batch, leave 3 when divided by 4: about a quarter, decided by the launch
// alone, so shrinking and replay see the same fault (tests/run/faults.py).

#ifndef VARLEN_TESTS_RUN_FAULT_BACKEND_H_
#define VARLEN_TESTS_RUN_FAULT_BACKEND_H_

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "varlen/backend/registry.h"

namespace varlen_test {

inline bool Faulty(const varlen::VarlenAttentionParams& p) {
  int64_t rows = 0;
  for (int b = 0; b < p.batch; ++b) rows += varlen::SequenceAt(p, b).rows;
  return rows % 4 == 3;
}

class FaultBackend final : public varlen::Backend {
 public:
  FaultBackend() : correct_(varlen::FindBackend("cpu_flash")) {
    const char* fault = std::getenv("VARLEN_TEST_FAULT");
    fault_ = fault == nullptr ? "none" : fault;
  }
  absl::string_view name() const override { return "fault_backend"; }
  absl::string_view description() const override {
    return "cpu_flash, faulting on a quarter of launches as VARLEN_TEST_FAULT says";
  }
  varlen::BackendCapabilities capabilities() const override { return correct_->capabilities(); }

  absl::Status Run(const varlen::VarlenAttentionParams& p) const override {
    if (device_lost_) return kStickyError;
    if (fault_ == "none" || !Faulty(p)) return correct_->Run(p);
    if (fault_ == "segfault") {
      volatile int* nowhere = nullptr;
      *nowhere = 1;
    } else if (fault_ == "abort") {
      std::abort();
    } else if (fault_ == "exit0") {
      std::_Exit(0);
    } else if (fault_ == "exit3") {
      std::_Exit(3);
    } else if (fault_ == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    } else if (fault_ == "oom") {
      std::vector<char*> blocks;
      for (int i = 0; i < 256; ++i) {  // 16 GiB at most; the supervisor stops it long before
        blocks.push_back(static_cast<char*>(std::malloc(64 << 20)));
        if (blocks.back() != nullptr) std::memset(blocks.back(), 1, 64 << 20);
      }
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    } else if (fault_ == "thread_throw") {
      std::thread([] { throw std::runtime_error("thrown on a helper thread"); }).join();
    } else if (fault_ == "write_past_output") {
      absl::Status ran = correct_->Run(p);
      const size_t bytes = static_cast<size_t>(p.o_numel) * varlen::DTypeSize(p.output_dtype);
      std::memset(static_cast<char*>(p.o) + bytes, 0x7f, 4);
      return ran;
    } else if (fault_ == "flaky") {
      if (std::random_device{}() % 2 == 0) std::abort();
    } else if (fault_ == "device_lost") {
      device_lost_ = true;
      return absl::OkStatus();  // launched; the output is never written
    } else if (fault_ == "scale_q_in_place") {
      const size_t bytes = static_cast<size_t>(p.q_numel) * varlen::DTypeSize(p.input_dtype);
      if (bytes > 0) static_cast<char*>(const_cast<void*>(p.q))[0] ^= 0x40;
      return correct_->Run(p);
    }
    return correct_->Run(p);
  }

  absl::Status DeviceHealth() const override {
    return device_lost_ ? kStickyError : absl::OkStatus();
  }

 private:
  inline static const absl::Status kStickyError = absl::InternalError(
      "cudaErrorIllegalAddress (mimicked): an illegal memory access was "
      "encountered");
  const varlen::Backend* correct_;
  std::string fault_;
  mutable std::atomic<bool> device_lost_ = false;
};

}  // namespace varlen_test

#endif  // VARLEN_TESTS_RUN_FAULT_BACKEND_H_

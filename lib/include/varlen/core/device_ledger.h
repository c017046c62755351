// File: varlen/core/device_ledger.h
// -----------------------------------------------------------------------------
//
// The device ledger records what a piece of host code made the device do:
// host syncs (a host read of a device tensor: .item(), .tolist(), .cpu(),
// bool(), int()), host-to-device copies, device-to-host copies and dtype
// casts. Tensor operations record into it; a ScopedDeviceLedger collects what
// happened inside one region, e.g. one argument resolution.
//
// This is what makes "resolution from prepared metadata performs zero host
// syncs" (required for CUDA-graph capture) testable on a machine without a
// GPU: the accounting does not depend on where the bytes really live.
//
// Thread model: each thread records into its own innermost active scope
// (and every enclosing one); scopes must be destroyed in reverse order.

#ifndef VARLEN_CORE_DEVICE_LEDGER_H_
#define VARLEN_CORE_DEVICE_LEDGER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace varlen {

enum class DeviceEventKind {
  kHostSync,          // the host waited for the device to produce a value
  kHostToDeviceCopy,  // not a sync, but still illegal under graph capture
  kDeviceToHostCopy,  // always paired with a host sync
  kCast,              // a dtype conversion that made a new tensor
};

absl::string_view DeviceEventKindName(DeviceEventKind kind);

struct DeviceEvent {
  DeviceEventKind kind;
  std::string what;  // the Python-level operation, e.g. "max_seqlen.item()"

  bool operator==(const DeviceEvent&) const = default;
};

struct DeviceEventCounts {
  int host_syncs = 0;
  int host_to_device_copies = 0;
  int device_to_host_copies = 0;
  int casts = 0;

  bool operator==(const DeviceEventCounts&) const = default;
};

// Tallies `events` by kind.
DeviceEventCounts CountDeviceEvents(const std::vector<DeviceEvent>& events);

// Records one event into every active scope of the calling thread. A no-op
// when no scope is active.
void RecordDeviceEvent(DeviceEventKind kind, absl::string_view what);

// Collects the events recorded on this thread while it is alive.
class ScopedDeviceLedger {
 public:
  ScopedDeviceLedger();
  ~ScopedDeviceLedger();
  ScopedDeviceLedger(const ScopedDeviceLedger&) = delete;
  ScopedDeviceLedger& operator=(const ScopedDeviceLedger&) = delete;

  const std::vector<DeviceEvent>& events() const { return events_; }
  DeviceEventCounts counts() const;

 private:
  friend void RecordDeviceEvent(DeviceEventKind kind, absl::string_view what);
  ScopedDeviceLedger* parent_;
  std::vector<DeviceEvent> events_;
};

}  // namespace varlen

#endif  // VARLEN_CORE_DEVICE_LEDGER_H_

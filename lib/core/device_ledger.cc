#include "varlen/core/device_ledger.h"

namespace varlen {
namespace {
thread_local ScopedDeviceLedger* current_ledger = nullptr;
}  // namespace

absl::string_view DeviceEventKindName(DeviceEventKind kind) {
  switch (kind) {
    case DeviceEventKind::kHostSync:
      return "host sync";
    case DeviceEventKind::kHostToDeviceCopy:
      return "host-to-device copy";
    case DeviceEventKind::kDeviceToHostCopy:
      return "device-to-host copy";
    case DeviceEventKind::kCast:
      return "cast";
  }
  return "unknown";
}

void RecordDeviceEvent(DeviceEventKind kind, absl::string_view what) {
  for (ScopedDeviceLedger* ledger = current_ledger; ledger != nullptr; ledger = ledger->parent_) {
    ledger->events_.push_back({kind, std::string(what)});
  }
}

ScopedDeviceLedger::ScopedDeviceLedger() : parent_(current_ledger) { current_ledger = this; }

ScopedDeviceLedger::~ScopedDeviceLedger() { current_ledger = parent_; }

DeviceEventCounts ScopedDeviceLedger::counts() const { return CountDeviceEvents(events_); }

DeviceEventCounts CountDeviceEvents(const std::vector<DeviceEvent>& events) {
  DeviceEventCounts counts;
  for (const DeviceEvent& event : events) {
    switch (event.kind) {
      case DeviceEventKind::kHostSync:
        ++counts.host_syncs;
        break;
      case DeviceEventKind::kHostToDeviceCopy:
        ++counts.host_to_device_copies;
        break;
      case DeviceEventKind::kDeviceToHostCopy:
        ++counts.device_to_host_copies;
        break;
      case DeviceEventKind::kCast:
        ++counts.casts;
        break;
    }
  }
  return counts;
}

}  // namespace varlen

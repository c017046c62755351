// Tests for the device ledger: scopes, nesting, counting and threads.

#include "varlen/core/device_ledger.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace varlen {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

DeviceEvent Event(DeviceEventKind kind, const char* what) { return {kind, what}; }

TEST(DeviceEventKindTest, Names) {
  EXPECT_EQ(DeviceEventKindName(DeviceEventKind::kHostSync), "host sync");
  EXPECT_EQ(DeviceEventKindName(DeviceEventKind::kHostToDeviceCopy), "host-to-device copy");
  EXPECT_EQ(DeviceEventKindName(DeviceEventKind::kDeviceToHostCopy), "device-to-host copy");
  EXPECT_EQ(DeviceEventKindName(DeviceEventKind::kCast), "cast");
}

TEST(DeviceEventTest, EqualityComparesKindAndLabel) {
  EXPECT_EQ(Event(DeviceEventKind::kCast, "a"), Event(DeviceEventKind::kCast, "a"));
  EXPECT_NE(Event(DeviceEventKind::kCast, "a"), Event(DeviceEventKind::kHostSync, "a"));
  EXPECT_NE(Event(DeviceEventKind::kCast, "a"), Event(DeviceEventKind::kCast, "b"));
}

TEST(ScopedDeviceLedgerTest, StartsEmpty) {
  ScopedDeviceLedger ledger;
  EXPECT_THAT(ledger.events(), IsEmpty());
  EXPECT_EQ(ledger.counts(), DeviceEventCounts{});
}

TEST(ScopedDeviceLedgerTest, RecordsEventsInOrderWithLabels) {
  ScopedDeviceLedger ledger;
  RecordDeviceEvent(DeviceEventKind::kHostSync, "max_seqlen.item()");
  RecordDeviceEvent(DeviceEventKind::kCast, "cu_seqlens.to(torch.int32)");
  RecordDeviceEvent(DeviceEventKind::kHostSync, "cu_seqlens.tolist()");
  EXPECT_THAT(ledger.events(),
              ElementsAre(Event(DeviceEventKind::kHostSync, "max_seqlen.item()"),
                          Event(DeviceEventKind::kCast, "cu_seqlens.to(torch.int32)"),
                          Event(DeviceEventKind::kHostSync, "cu_seqlens.tolist()")));
}

TEST(ScopedDeviceLedgerTest, CountsTallyEachKind) {
  ScopedDeviceLedger ledger;
  RecordDeviceEvent(DeviceEventKind::kHostSync, "a");
  RecordDeviceEvent(DeviceEventKind::kHostSync, "b");
  RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy, "c");
  RecordDeviceEvent(DeviceEventKind::kDeviceToHostCopy, "d");
  RecordDeviceEvent(DeviceEventKind::kDeviceToHostCopy, "e");
  RecordDeviceEvent(DeviceEventKind::kDeviceToHostCopy, "f");
  RecordDeviceEvent(DeviceEventKind::kCast, "g");
  DeviceEventCounts expected;
  expected.host_syncs = 2;
  expected.host_to_device_copies = 1;
  expected.device_to_host_copies = 3;
  expected.casts = 1;
  EXPECT_EQ(ledger.counts(), expected);
  EXPECT_EQ(CountDeviceEvents(ledger.events()), expected);
}

TEST(CountDeviceEventsTest, CountsAPlainVector) {
  EXPECT_EQ(CountDeviceEvents({}), DeviceEventCounts{});
  const std::vector<DeviceEvent> events = {Event(DeviceEventKind::kCast, "x"),
                                           Event(DeviceEventKind::kCast, "y"),
                                           Event(DeviceEventKind::kHostSync, "z")};
  const DeviceEventCounts counts = CountDeviceEvents(events);
  EXPECT_EQ(counts.host_syncs, 1);
  EXPECT_EQ(counts.host_to_device_copies, 0);
  EXPECT_EQ(counts.device_to_host_copies, 0);
  EXPECT_EQ(counts.casts, 2);
}

TEST(ScopedDeviceLedgerTest, NoScopeIsANoOp) {
  RecordDeviceEvent(DeviceEventKind::kHostSync, "nobody is listening");
  ScopedDeviceLedger ledger;  // opened afterwards: sees nothing from before
  EXPECT_THAT(ledger.events(), IsEmpty());
}

TEST(ScopedDeviceLedgerTest, NestedScopesBothSeeInnerEvents) {
  ScopedDeviceLedger outer;
  RecordDeviceEvent(DeviceEventKind::kCast, "before");
  {
    ScopedDeviceLedger inner;
    RecordDeviceEvent(DeviceEventKind::kHostSync, "inside");
    EXPECT_THAT(inner.events(), ElementsAre(Event(DeviceEventKind::kHostSync, "inside")));
  }
  RecordDeviceEvent(DeviceEventKind::kHostToDeviceCopy, "after");
  EXPECT_THAT(outer.events(), ElementsAre(Event(DeviceEventKind::kCast, "before"),
                                          Event(DeviceEventKind::kHostSync, "inside"),
                                          Event(DeviceEventKind::kHostToDeviceCopy, "after")));
}

TEST(ScopedDeviceLedgerTest, ThreeLevelsAndSiblingScopes) {
  ScopedDeviceLedger a;
  {
    ScopedDeviceLedger b;
    {
      ScopedDeviceLedger c;
      RecordDeviceEvent(DeviceEventKind::kHostSync, "deep");
      EXPECT_EQ(c.counts().host_syncs, 1);
    }
    RecordDeviceEvent(DeviceEventKind::kCast, "middle");
    EXPECT_EQ(b.events().size(), 2u);
  }
  {
    ScopedDeviceLedger sibling;
    RecordDeviceEvent(DeviceEventKind::kDeviceToHostCopy, "sibling");
    EXPECT_THAT(sibling.events(),
                ElementsAre(Event(DeviceEventKind::kDeviceToHostCopy, "sibling")));
  }
  EXPECT_THAT(a.events(), ElementsAre(Event(DeviceEventKind::kHostSync, "deep"),
                                      Event(DeviceEventKind::kCast, "middle"),
                                      Event(DeviceEventKind::kDeviceToHostCopy, "sibling")));
}

TEST(ScopedDeviceLedgerTest, ScopeEndsWithItsLifetime) {
  {
    ScopedDeviceLedger ledger;
    RecordDeviceEvent(DeviceEventKind::kHostSync, "inside");
  }
  // A destroyed scope must not be written to; ASan catches a dangling one.
  RecordDeviceEvent(DeviceEventKind::kHostSync, "after");
  ScopedDeviceLedger fresh;
  EXPECT_THAT(fresh.events(), IsEmpty());
}

TEST(ScopedDeviceLedgerTest, EventsOnAnotherThreadAreNotSeen) {
  ScopedDeviceLedger main_ledger;
  std::thread worker([] { RecordDeviceEvent(DeviceEventKind::kHostSync, "worker"); });
  worker.join();
  EXPECT_THAT(main_ledger.events(), IsEmpty());
}

TEST(ScopedDeviceLedgerTest, EachThreadHasItsOwnScopes) {
  ScopedDeviceLedger main_ledger;
  std::vector<DeviceEvent> worker_events;
  std::thread worker([&worker_events] {
    ScopedDeviceLedger worker_ledger;
    RecordDeviceEvent(DeviceEventKind::kCast, "worker");
    worker_events = worker_ledger.events();
  });
  worker.join();
  RecordDeviceEvent(DeviceEventKind::kHostSync, "main");
  EXPECT_THAT(worker_events, ElementsAre(Event(DeviceEventKind::kCast, "worker")));
  EXPECT_THAT(main_ledger.events(), ElementsAre(Event(DeviceEventKind::kHostSync, "main")));
}

TEST(ScopedDeviceLedgerTest, ConcurrentThreadsDoNotMix) {
  constexpr int kThreads = 4;
  constexpr int kEvents = 500;
  std::vector<DeviceEventCounts> counts(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &counts] {
      ScopedDeviceLedger ledger;
      for (int i = 0; i < kEvents + t; ++i) {
        RecordDeviceEvent(DeviceEventKind::kHostSync, "sync");
      }
      counts[static_cast<size_t>(t)] = ledger.counts();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(counts[static_cast<size_t>(t)].host_syncs, kEvents + t) << "thread " << t;
    EXPECT_EQ(counts[static_cast<size_t>(t)].casts, 0) << "thread " << t;
  }
}

}  // namespace
}  // namespace varlen

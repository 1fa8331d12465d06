// put(Add) staging (core/src/staging.h): the layout, and the target's check of a slot header, which
// must refuse anything that does not land wholly inside one of its buffers.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "staging.h"
#include "stripe_locks.h"

using rwin::DType;
using namespace rwin::detail;

namespace {

const std::vector<TargetSpan> kSpans = {{0x10000, 4096}, {0x7f0000000000, 1 << 20}};

SlotHeader good() {
  SlotHeader h;
  h.dtype = static_cast<uint8_t>(DType::F32);
  h.src = 2;
  h.seq = 7;
  h.addr = 0x7f0000000000 + 64;
  h.bytes = 400;
  return h;
}

SlotCheck check(const SlotHeader& h, uint64_t payload = 16320) {
  unsigned char raw[kSlotHeaderBytes] = {};
  std::memcpy(raw, &h, sizeof h);
  return check_slot_header(raw, payload, 2, 7, kSpans);
}

TEST(Staging, LayoutDividesTheInboxAmongSources) {
  const StagingLayout l = staging_layout(5, 4 << 20);
  EXPECT_EQ(l.slots, kStagingSlots);
  EXPECT_EQ(l.slot_bytes % 4096, 0u);
  EXPECT_LE(l.slot_bytes * l.slots * 5, uint64_t{4} << 20);
  EXPECT_EQ(staging_layout(64, 4096).slot_bytes, kMinSlotBytes) << "never below the minimum";
  EXPECT_EQ(l.inbox(0, 0), l.control_bytes());
  EXPECT_EQ(l.inbox(1, 0), l.inbox(0, l.slots - 1) + l.slot_bytes) << "sources' rings are back to back";
  EXPECT_EQ(l.outbox(0), l.inbox(5, 0));
  EXPECT_GE(l.control_bytes(), 2u * 5 * 8);
  EXPECT_LT(l.posted_word(4), l.acked_word(0));
  EXPECT_LT(l.acked_word(4), l.control_bytes());
}

TEST(Staging, AGoodHeaderNamesItsBuffer) {
  const SlotCheck c = check(good());
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(c.span, 1u);
  SlotHeader h = good();
  h.addr = 0x7f0000000000 + (1 << 20) - 400;  // ends exactly at the buffer's end
  EXPECT_TRUE(check(h).ok);
  h.addr = 0x10000;
  h.bytes = 4096;  // the whole first buffer
  EXPECT_TRUE(check(h, 4096).ok);
}

TEST(Staging, GarbageHeadersAreRefusedWithAReason) {
  struct Bad {
    const char* what;
    void (*spoil)(SlotHeader&);
    const char* says;
  };
  const Bad bad[] = {
      {"magic", [](SlotHeader& h) { h.magic = 0; }, "not a slot header"},
      {"version", [](SlotHeader& h) { h.version = 9; }, "not a slot header"},
      {"source", [](SlotHeader& h) { h.src = 3; }, "names rank 3"},
      {"sequence", [](SlotHeader& h) { h.seq = 8; }, "slot 8"},
      {"dtype", [](SlotHeader& h) { h.dtype = 200; }, "not a DType"},
      {"zero bytes", [](SlotHeader& h) { h.bytes = 0; }, "whole elements"},
      {"part of an element", [](SlotHeader& h) { h.bytes = 402; }, "whole elements"},
      {"more than the slot", [](SlotHeader& h) { h.bytes = 16324; }, "whole elements"},
      {"before every buffer", [](SlotHeader& h) { h.addr = 0x1000; }, "outside every window buffer"},
      {"past a buffer's end", [](SlotHeader& h) { h.addr = 0x7f0000000000 + (1 << 20) - 396; }, "outside every"},
      {"between buffers", [](SlotHeader& h) { h.addr = 0x10000 + 4096; }, "outside every"},
      {"wrapping the address space", [](SlotHeader& h) { h.addr = UINT64_MAX - 100; }, "outside every"},
      {"huge size wrapping", [](SlotHeader& h) { h.bytes = UINT64_MAX - 3; }, "whole elements"},
      {"off an element boundary", [](SlotHeader& h) { h.addr += 2; }, "element boundary"},
  };
  for (const Bad& b : bad) {
    SlotHeader h = good();
    b.spoil(h);
    const SlotCheck c = check(h);
    EXPECT_FALSE(c.ok) << b.what;
    EXPECT_NE(c.error.find(b.says), std::string::npos) << b.what << ": " << c.error;
    EXPECT_NE(c.error.find("from rank 2"), std::string::npos) << b.what << ": " << c.error;
  }
  // A size that fits the slot but overruns the buffer from near its end.
  SlotHeader h = good();
  h.addr = 0x10000 + 4000;
  h.bytes = 400;
  EXPECT_FALSE(check(h).ok);
}

TEST(StripeLocks, PiecesNeverCrossAStripeAndTheTableFollowsTheBytes) {
  EXPECT_EQ(stripe_piece_end(0, 10), 10u);
  EXPECT_EQ(stripe_piece_end(kStripeBytes - 4, kStripeBytes + 4), kStripeBytes);
  EXPECT_EQ(stripe_piece_end(kStripeBytes, 3 * kStripeBytes), 2 * kStripeBytes);
  EXPECT_EQ(stripe_count(1), 1u);
  EXPECT_EQ(stripe_count(kStripeBytes), 1u);
  EXPECT_EQ(stripe_count(kStripeBytes + 1), 2u);
  EXPECT_EQ(lock_offset(13) % 64, 0u);
  EXPECT_GE(lock_offset(13), 16u) << "an int32 signal's 8-byte word past an odd size stays inside";
  EXPECT_EQ(region_bytes(kStripeBytes * 3), kStripeBytes * 3 + 24);
  uint64_t w = 0;
  EXPECT_EQ(try_lock(&w, 3), 0u);
  EXPECT_EQ(try_lock(&w, 5), 3u) << "held: the holder is returned";
  unlock(&w);
  EXPECT_EQ(try_lock(&w, 5), 0u);
}

}  // namespace

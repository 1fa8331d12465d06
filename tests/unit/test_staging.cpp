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

// O(active) progress (issue 23): the target finds posted slots through the doorbells. Control words
// in plain memory stand in for the region; sources "post" by bumping their posted word and bells.
namespace {
struct PlainControlWords {
  StagingLayout l;
  std::vector<uint64_t> words;
  std::vector<uint64_t> applied;
  BellScan bells;
  explicit PlainControlWords(int n) {
    l = staging_layout(n, 1 << 20);
    words.assign(l.control_bytes() / 8, 0);
    applied.assign(static_cast<size_t>(n), 0);
    bells.reset(l);
  }
  uint64_t& at(uint64_t off) { return words[off / 8]; }
  void post(int src, bool posted = true, bool group = true, bool top = true) {
    if (posted) at(l.posted_word(src))++;
    if (group) at(l.group_bell_word(src / kBellFanout))++;
    if (top && l.two_level()) at(l.top_bell_word())++;
  }
  uint64_t scan() {  // returns the slots applied
    uint64_t got = 0;
    bells.scan(l, [&](uint64_t off) { return at(off); }, [&](int src) {
      const uint64_t d = at(l.posted_word(src)) - applied[static_cast<size_t>(src)];
      applied[static_cast<size_t>(src)] += d;
      got += d;
      return d;
    });
    return got;
  }
};
}  // namespace

TEST(StagingBells, LayoutKeepsTheBellsInsideTheControlWords) {
  for (int n : {1, 2, 16, 17, 64, 1000}) {
    const StagingLayout l = staging_layout(n, 1 << 20);
    EXPECT_EQ(l.groups(), (n + kBellFanout - 1) / kBellFanout);
    EXPECT_EQ(l.two_level(), n > kBellFanout);
    EXPECT_GT(l.group_bell_word(0), l.acked_word(n - 1));
    if (l.two_level()) {
      EXPECT_GT(l.group_bell_word(0), l.top_bell_word());
    }
    EXPECT_LT(l.group_bell_word(l.groups() - 1), l.control_bytes());
    EXPECT_EQ(l.inbox(0, 0), l.control_bytes());
  }
}

TEST(StagingBells, AnIdleCallReadsOneWordWhateverTheNumberOfSources) {
  for (int n : {2, 16, 17, 1000}) {
    PlainControlWords r(n);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(r.scan(), 0u);
    EXPECT_EQ(r.bells.sources_scanned, 0u) << n << " ranks";
    EXPECT_EQ(r.bells.bell_reads, 10u) << n << " ranks: one bell per idle call";
  }
}

TEST(StagingBells, ACallWithOneActiveSourceReadsOnlyItsGroup) {
  // 1000 sources, one posting: each call reads the top bell, every group bell and the posted words
  // of one group: no more with 999 idle sources than the group's 16.
  PlainControlWords r(1000);
  const uint64_t groups = static_cast<uint64_t>(r.l.groups());
  for (int i = 0; i < 5; ++i) {
    r.post(517);
    const uint64_t reads = r.bells.bell_reads, scanned = r.bells.sources_scanned;
    EXPECT_EQ(r.scan(), 1u);
    EXPECT_EQ(r.bells.sources_scanned - scanned, static_cast<uint64_t>(kBellFanout));
    EXPECT_EQ(r.bells.bell_reads - reads, 1 + groups);
    EXPECT_EQ(r.scan(), 0u);  // then idle again: one word
    EXPECT_EQ(r.bells.sources_scanned - scanned, static_cast<uint64_t>(kBellFanout));
    EXPECT_EQ(r.bells.bell_reads - reads, 2 + groups);
  }
}

TEST(StagingBells, BellsAndPostedWordsLandingInAnyOrderAreNeverMissed) {
  PlainControlWords r(40);
  // The bells land before the posted word (an unordered transport): scanned until it lands.
  r.post(3, false, true, true);
  EXPECT_EQ(r.scan(), 0u);
  EXPECT_EQ(r.scan(), 0u);
  const uint64_t scanned = r.bells.sources_scanned;
  EXPECT_GT(scanned, 0u) << "a bell above its count is scanned again";
  r.post(3, true, false, false);
  EXPECT_EQ(r.scan(), 1u);
  EXPECT_EQ(r.scan(), 0u);
  // The posted word lands first, then the group bell, then the top bell.
  r.post(33, true, false, false);
  EXPECT_EQ(r.scan(), 0u);  // nothing rang yet
  r.post(33, false, true, false);
  EXPECT_EQ(r.scan(), 0u);  // the top bell has not moved
  r.post(33, false, false, true);
  EXPECT_EQ(r.scan(), 1u);
  // A source posting in another source's scan is applied early; its own bells then find nothing.
  r.post(20);
  r.post(21, true, false, false);
  EXPECT_EQ(r.scan(), 2u);
  r.post(21, false, true, true);
  const uint64_t before = r.bells.sources_scanned;
  EXPECT_EQ(r.scan(), 0u);
  EXPECT_EQ(r.bells.sources_scanned, before) << "counts agree: no rescan";
  for (int s = 0; s < 40; ++s) EXPECT_EQ(r.applied[static_cast<size_t>(s)], r.at(r.l.posted_word(s))) << s;
}

// The target-applied put(Add) protocol for peers whose memory is not mapped here (UCX tcp/am and
// native modes, verbs): the source writes [header | addends] into a slot of the target's staging
// region with an ordinary Write, then bumps the target's "posted" counter for it with an atomic
// ordered after the write; the target, inside its progress, validates the header, adds the slot
// into its own buffer under the stripe locks, and bumps the source's "acked" counter.
//
// Pure layout and header code here (unit-tested and fuzzed without a transport); the protocol
// itself is in staging.cpp and accumulate.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rwin/rwin.h"

namespace rwin::detail {

constexpr uint32_t kStagingSlots = 4;            // K: slots per source, the pipeline of one put(Add)
constexpr uint64_t kSlotHeaderBytes = 64;        // header, padded so the addends start 64-byte aligned
constexpr uint64_t kMinSlotBytes = 16 << 10;     // C never below this, whatever the configured total
constexpr uint32_t kSlotMagic = 0x52574143;      // "RWAC"
constexpr uint8_t kSlotVersion = 1;

constexpr int kBellFanout = 16;  // sources per doorbell group (staging bells, below)

// One rank's staging region: control words, then an inbox of K slots of C bytes per source rank,
// then an outbox of K slots (local only: the registered source of this rank's slot writes).
// Control words: per source its "posted" count, per target its "acked" count, then the doorbells:
// one counter per group of kBellFanout sources, and above them (more than one group) a top counter.
// A source adds 1 to its posted word, its group's bell and the top bell for every slot it posts, so
// the target finds posted slots by reading the top bell (one word while nothing is posted) and then
// only the groups whose count moved: it never reads the posted words of idle sources' groups.
struct StagingLayout {
  int nranks = 0;
  uint32_t slots = kStagingSlots;
  uint64_t slot_bytes = 0;  // C

  uint64_t posted_word(int src) const noexcept { return static_cast<uint64_t>(src) * 8; }
  uint64_t acked_word(int target) const noexcept { return static_cast<uint64_t>(nranks + target) * 8; }
  int groups() const noexcept { return (nranks + kBellFanout - 1) / kBellFanout; }
  bool two_level() const noexcept { return groups() > 1; }
  uint64_t top_bell_word() const noexcept { return static_cast<uint64_t>(2 * nranks) * 8; }  // two_level() only
  uint64_t group_bell_word(int g) const noexcept {
    return static_cast<uint64_t>(2 * nranks + (two_level() ? 1 : 0) + g) * 8;
  }
  uint64_t control_bytes() const noexcept {
    return (static_cast<uint64_t>(2 * nranks + (two_level() ? 1 : 0) + groups()) * 8 + 63) & ~uint64_t{63};
  }
  uint64_t inbox(int src, uint64_t k) const noexcept {
    return control_bytes() + (static_cast<uint64_t>(src) * slots + k) * slot_bytes;
  }
  uint64_t outbox(uint64_t k) const noexcept { return inbox(nranks, 0) + k * slot_bytes; }
  uint64_t total_bytes() const noexcept { return outbox(slots); }
  uint64_t payload_bytes() const noexcept { return slot_bytes - kSlotHeaderBytes; }
};

// The layout for `nranks` ranks and `inbound` bytes of inbox in total (RWIN_ACCUMULATE_STAGING_BYTES):
// each source gets inbound / nranks, cut into K slots, each rounded down to 4 KiB and never below
// kMinSlotBytes.
StagingLayout staging_layout(int nranks, uint64_t inbound) noexcept;

// What the source writes at the start of a slot (little-endian, as the CPUs of one job are).
struct SlotHeader {
  uint32_t magic = kSlotMagic;
  uint8_t version = kSlotVersion;
  uint8_t dtype = 0;
  uint16_t reserved = 0;
  uint32_t src = 0;      // the writing rank
  uint32_t reserved2 = 0;
  uint64_t seq = 0;      // 0, 1, 2, ... per (source, target): slot seq % K
  uint64_t addr = 0;     // the target's absolute address of the first element
  uint64_t bytes = 0;    // addends following the header
};
static_assert(sizeof(SlotHeader) <= kSlotHeaderBytes);

// A buffer of the target that a put(Add) may land in: [base, base + bytes).
struct TargetSpan {
  uint64_t base = 0;
  uint64_t bytes = 0;
};

struct SlotCheck {
  bool ok = false;
  size_t span = 0;      // index into `spans` of the buffer the slot lands in
  SlotHeader header{};  // as read
  std::string error;    // why not ("slot 3 from rank 1: address 0x... outside every buffer")
};

// Validates the header at the start of a slot (`raw`, at least kSlotHeaderBytes readable) that
// rank `src` posted as its `expected_seq`-th: magic, version, source, sequence, dtype, a size that
// is a whole number of elements and fits the slot's `payload` bytes, and a destination lying
// wholly inside one of `spans` at an element boundary of it. Pure: a garbage header yields an
// error, never an access outside `raw`.
// The target's side of the doorbells: how many slots of each group (and in all) it has accounted
// for (applied, or dropped with a failed source). A bell above its accounted count means some slot
// of that group is posted and not yet applied. The counts only grow and the bells are read, never
// written here (a CPU store into a word NIC atomics update would not be atomic against them), and
// a bell may land before or after its posted word (no ordering needed): a group is scanned again
// at every call until its accounted count catches up with its bell.
struct BellScan {
  std::vector<uint64_t> group_seen;  // per group
  uint64_t total_seen = 0;
  // Work counters (tests; docs): bell words read, and sources whose posted word was read.
  uint64_t bell_reads = 0;
  uint64_t sources_scanned = 0;
  uint64_t scans = 0;  // calls

  void reset(const StagingLayout& l) { group_seen.assign(static_cast<size_t>(l.groups()), 0); }

  // read(offset) loads the control word at `offset` (acquire); visit(src) reads that source's
  // posted word, applies or drops what is new and returns how many slots it accounted for.
  template <class Read, class Visit>
  void scan(const StagingLayout& l, Read read, Visit visit) {
    ++scans;
    if (l.two_level()) {
      ++bell_reads;
      if (read(l.top_bell_word()) <= total_seen) return;
    }
    for (int g = 0; g < l.groups(); ++g) {
      ++bell_reads;
      if (read(l.group_bell_word(g)) <= group_seen[static_cast<size_t>(g)]) continue;
      const int end = std::min(l.nranks, (g + 1) * kBellFanout);
      for (int src = g * kBellFanout; src < end; ++src) {
        ++sources_scanned;
        const uint64_t d = visit(src);
        group_seen[static_cast<size_t>(g)] += d;
        total_seen += d;
      }
    }
  }
};

SlotCheck check_slot_header(const void* raw, uint64_t payload, int src, uint64_t expected_seq,
                            std::span<const TargetSpan> spans);

}  // namespace rwin::detail

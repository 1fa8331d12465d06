// put(Add) staging: the layout and the slot header check (pure; fuzzed by tests/fuzz/staging_header_fuzz.cpp).
#include "staging.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace rwin::detail {

StagingLayout staging_layout(int nranks, uint64_t inbound) noexcept {
  StagingLayout l;
  l.nranks = nranks;
  l.slots = kStagingSlots;
  const uint64_t per_slot = inbound / static_cast<uint64_t>(nranks > 0 ? nranks : 1) / kStagingSlots;
  l.slot_bytes = per_slot & ~uint64_t{4095};
  if (l.slot_bytes < kMinSlotBytes) l.slot_bytes = kMinSlotBytes;
  return l;
}

namespace {
std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}
}  // namespace

SlotCheck check_slot_header(const void* raw, uint64_t payload, int src, uint64_t expected_seq,
                            std::span<const TargetSpan> spans) {
  SlotCheck r;
  std::memcpy(&r.header, raw, sizeof r.header);
  const SlotHeader& h = r.header;
  const std::string head = "put(Add) slot " + std::to_string(expected_seq) + " from rank " + std::to_string(src) + ": ";
  if (h.magic != kSlotMagic || h.version != kSlotVersion) {
    r.error = head + "not a slot header (magic " + hex(h.magic) + ", version " + std::to_string(h.version) +
              "; mixed rwin builds in one job?)";
    return r;
  }
  if (h.src != static_cast<uint32_t>(src) || h.seq != expected_seq) {
    r.error = head + "header names rank " + std::to_string(h.src) + " slot " + std::to_string(h.seq);
    return r;
  }
  const size_t esz = dtype_size(static_cast<DType>(h.dtype));
  if (esz == 0) {
    r.error = head + "dtype code " + std::to_string(h.dtype) + " is not a DType";
    return r;
  }
  if (h.bytes == 0 || h.bytes % esz != 0 || h.bytes > payload) {
    r.error = head + std::to_string(h.bytes) + " bytes: not 1.." + std::to_string(payload) + " whole elements of " +
              std::to_string(esz) + " bytes";
    return r;
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    const TargetSpan& s = spans[i];
    if (h.addr < s.base || h.addr - s.base > s.bytes || h.bytes > s.bytes - (h.addr - s.base)) continue;
    if ((h.addr - s.base) % esz != 0) {
      r.error = head + "address " + hex(h.addr) + " is not at an element boundary of its buffer";
      return r;
    }
    r.ok = true;
    r.span = i;
    return r;
  }
  r.error = head + "destination [" + hex(h.addr) + ", +" + std::to_string(h.bytes) + ") lies outside every window buffer";
  return r;
}

}  // namespace rwin::detail


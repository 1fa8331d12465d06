// The header of a put(Add) staging slot, as the target reads it from memory a peer wrote
// (core/src/staging.h, check_slot_header). Properties: a header that passes names a destination
// wholly inside one of the target's buffers, at an element boundary, of whole elements that fit
// the slot; one that fails says why.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "staging.h"

using namespace rwin::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  unsigned char raw[kSlotHeaderBytes] = {};
  std::memcpy(raw, data, size < sizeof raw ? size : sizeof raw);
  // The rest of the input: the expected sequence and the slot's payload.
  uint64_t seq = 0, payload = 16320;
  if (size >= kSlotHeaderBytes + 8) std::memcpy(&seq, data + kSlotHeaderBytes, 8);
  if (size >= kSlotHeaderBytes + 16) std::memcpy(&payload, data + kSlotHeaderBytes + 8, 8);
  static const std::vector<TargetSpan> spans = {{0x10000, 4096}, {0x7f0000000000, 1 << 20}, {UINT64_MAX - 4095, 4096}};
  SlotHeader h;
  std::memcpy(&h, raw, sizeof h);
  const SlotCheck c = check_slot_header(raw, payload, static_cast<int>(h.src), seq, spans);
  if (!c.ok) {
    FUZZ_CHECK(!c.error.empty());
    return 0;
  }
  FUZZ_CHECK(c.span < spans.size());
  const TargetSpan& s = spans[c.span];
  const size_t esz = rwin::dtype_size(static_cast<rwin::DType>(c.header.dtype));
  FUZZ_CHECK(esz != 0 && c.header.bytes > 0 && c.header.bytes % esz == 0 && c.header.bytes <= payload);
  FUZZ_CHECK(c.header.addr >= s.base && (c.header.addr - s.base) % esz == 0);
  FUZZ_CHECK(c.header.addr - s.base <= s.bytes && c.header.bytes <= s.bytes - (c.header.addr - s.base));
  FUZZ_CHECK(c.header.seq == seq && std::memcmp(&c.header, raw, sizeof c.header) == 0);
  return 0;
}

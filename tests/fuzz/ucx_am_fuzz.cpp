// The am-mode wire format (transport/ucx/ucx_am_wire.h): request, batch and reply headers and
// the batch walk the target runs over a batch's data.
// Input: kind byte (request / batch / reply), header length byte, the header, then the data.
// Properties: a header decodes only at its exact size; every request walk_batch hands out is
// well formed and its payload lies inside the data, back to back; re-appending what it handed
// out (append_request, the initiator's encoder) rebuilds exactly the bytes it consumed; a batch
// is complete only when it consumed everything it declared.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "transport/ucx/ucx_am_wire.h"

namespace am = rwin::transport::ucx_am;

namespace {
constexpr int kRanks = 4;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int kind = data[0] % 3;
  size_t header_length = data[1];
  data += 2;
  size -= 2;
  if (header_length > size) header_length = size;
  const uint8_t* header = data;
  const uint8_t* body = data + header_length;
  const size_t length = size - header_length;
  if (kind == 0) {
    am::AmRequest h;
    const bool ok = am::decode_header(header, header_length, h);
    FUZZ_CHECK(ok == (header_length == sizeof h));
    if (ok) {
      FUZZ_CHECK(std::memcmp(&h, header, sizeof h) == 0);
      if (am::well_formed(h, kRanks)) FUZZ_CHECK(h.sender >= 0 && h.sender < kRanks);
    }
  } else if (kind == 1) {
    am::AmBatch b;
    const bool ok = am::decode_header(header, header_length, b);
    FUZZ_CHECK(ok == (header_length == sizeof b));
    if (ok && !am::well_formed(b, kRanks, length)) return 0;
    std::vector<uint8_t> rebuilt;
    size_t expect_at = 0;
    const am::BatchWalk w =
        am::walk_batch(body, length, kRanks, [&](const am::AmRequest& h, size_t at, size_t plen) {
          FUZZ_CHECK(am::well_formed(h, kRanks));
          FUZZ_CHECK(at == expect_at + sizeof h);
          FUZZ_CHECK(plen == am::payload_bytes(h));
          FUZZ_CHECK(at <= length && plen <= length - at);
          am::append_request(rebuilt, h, body + at, plen);
          expect_at = at + plen;
        });
    FUZZ_CHECK(w.off == expect_at && w.off <= length);
    FUZZ_CHECK(rebuilt.size() == w.off && (w.off == 0 || std::memcmp(rebuilt.data(), body, w.off) == 0));
    if (w.malformed) FUZZ_CHECK(!am::well_formed(w.bad, kRanks) && w.off < length);
    if (ok && w.complete(length, b.count)) FUZZ_CHECK(w.off == length && !w.malformed);
  } else {
    am::AmReply r;
    const bool ok = am::decode_header(header, header_length, r);
    FUZZ_CHECK(ok == (header_length == sizeof r));
    if (ok) FUZZ_CHECK(std::memcmp(&r, header, sizeof r) == 0);
  }
  return 0;
}

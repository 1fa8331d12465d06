// The bootstrap store's request decoding (bootstrap/wire.h), as the server reads a connection:
// frames back to back, each header checked before its body is awaited.
// Properties: a frame that decodes re-encodes (encode_request, the client's encoding) to exactly
// its bytes; every key and value is within its cap; a header the server accepts never declares
// more than max_body(op); decoding stops at the first bad frame, as the server drops the peer.
#include <cstdint>
#include <cstring>
#include <vector>

#include "bootstrap/wire.h"
#include "fuzz_check.h"

namespace w = rwin::bootstrap::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t off = 0;
  while (off < size) {
    w::Request req;
    size_t used = 0;
    const w::Decode d = w::decode_request(data + off, size - off, req, used);
    if (d == w::Decode::NeedMore) {
      if (size - off >= w::kHeaderSize) {
        const w::Header h = w::load_header(data + off);
        FUZZ_CHECK(w::check_request_header(h) == w::HeaderCheck::Ok);
        FUZZ_CHECK(h.body_len <= w::max_body(h.op) && h.body_len > size - off - w::kHeaderSize);
      }
      break;
    }
    if (d != w::Decode::Ok) break;
    FUZZ_CHECK(used >= w::kHeaderSize && used <= size - off);
    const w::Header h = w::load_header(data + off);
    FUZZ_CHECK(h.body_len <= w::max_body(h.op) && used == w::kHeaderSize + h.body_len);
    FUZZ_CHECK(static_cast<uint16_t>(req.op) == h.op);
    FUZZ_CHECK(req.keys.size() <= w::kMaxKeysPerRequest);
    for (const auto& k : req.keys) FUZZ_CHECK(k.size() <= w::kMaxKey);
    FUZZ_CHECK(req.value.size() <= w::kMaxValue);
    const std::vector<uint8_t> again = w::encode_request(req);
    FUZZ_CHECK(again.size() == used && std::memcmp(again.data(), data + off, used) == 0);
    off += used;
  }
  return 0;
}

// The bootstrap store's request decoding (bootstrap/wire.h), as the server reads a connection:
// frames back to back, each header checked against the connection's state before its body is
// awaited. The first input byte picks the state (before hello, before auth, data, lease).
// Properties: a data or goodbye frame that decodes re-encodes (encode_request, the client's
// encoding) to exactly its bytes; every key and value is within its cap; an accepted header never
// declares more than max_body(op); decoding stops at the first bad frame, as the server drops the peer.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/wire.h"
#include "fuzz_check.h"

namespace w = rwin::bootstrap::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const w::ConnState states[] = {w::ConnState::ExpectHello, w::ConnState::ExpectAuth, w::ConnState::Data,
                                 w::ConnState::Lease};
  const w::ConnState st = states[data[0] % 4];
  size_t off = 1;
  while (off < size) {
    w::Request req;
    size_t used = 0;
    std::string why;
    const w::Decode d = w::decode_frame(data + off, size - off, st, req, used, why);
    if (d == w::Decode::NeedMore) {
      if (size - off >= w::kHeaderSize) {
        const uint32_t len = w::load_u32(data + off + 8);
        FUZZ_CHECK(len <= w::max_body(w::load_u16(data + off + 6)) && len > size - off - w::kHeaderSize);
      }
      break;
    }
    if (d != w::Decode::Ok) {
      FUZZ_CHECK(d == w::Decode::BadBody || !why.empty());  // a refused header always says why
      break;
    }
    FUZZ_CHECK(used >= w::kHeaderSize && used <= size - off);
    FUZZ_CHECK(w::op_allowed(st, static_cast<uint16_t>(req.op)));
    FUZZ_CHECK(used - w::kHeaderSize <= w::max_body(static_cast<uint16_t>(req.op)));
    FUZZ_CHECK(req.keys.size() <= w::kMaxKeysPerRequest && req.key.size() <= w::kMaxKey);
    for (const auto& k : req.keys) FUZZ_CHECK(k.size() <= w::kMaxKey);
    FUZZ_CHECK(req.value.size() <= w::kMaxValue && req.reason.size() <= w::kMaxGoodbyeReason);
    if (req.op != w::Op::Hello && req.op != w::Op::Auth) {
      const std::vector<uint8_t> again = w::encode_request(req);
      FUZZ_CHECK(again.size() == used && std::memcmp(again.data(), data + off, used) == 0);
    }
    off += used;
  }
  return 0;
}

// Wire format of the UCX transport's am mode (ucx_transport_impl.h, "am mode protocol"): the
// request, batch and reply headers and the pure checks the target and initiator apply to them
// before touching any state. Free of <ucp/api/ucp.h> so the fuzzer (tests/fuzz) and unit tests
// run the real parsers. Headers are trivially copyable and always moved with memcpy (no
// alignment trust); host byte order (one build, one architecture per job).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "transport/transport.h"

namespace rwin::transport::ucx_am {

inline constexpr uint32_t kAmMagic = 0x52574d41;  // "RWMA": rwin am message

struct AmRequest {
  uint32_t magic = kAmMagic;
  uint8_t op = 0;        // Op
  uint8_t version = 1;
  uint16_t reserved = 0;
  int32_t sender = -1;   // rank of the sender
  uint32_t reserved2 = 0;
  uint64_t seq = 0;      // per (sender -> target), from 0
  uint64_t addr = 0;     // absolute target address
  uint64_t len = 0;      // Write/Read bytes, 8 for atomics, 0 for Flush
  uint64_t operand = 0;  // add / swap / CAS new value
  uint64_t compare = 0;  // CAS expected value
  uint64_t token = 0;    // echoed in the reply; 0 = no reply wanted
};
// Header of a batch message; its data is `count` requests back to back, each an AmRequest
// followed by its payload (h.len bytes for a Write, none otherwise), with no padding.
struct AmBatch {
  uint32_t magic = kAmMagic;
  uint8_t version = 1;
  uint8_t reserved = 0;
  uint16_t reserved1 = 0;
  int32_t sender = -1;
  uint32_t count = 0;   // requests in the data
  uint64_t bytes = 0;   // data length
};
enum class AmStatus : uint8_t { Ok = 0, Rejected = 1 };
struct AmReply {
  uint32_t magic = kAmMagic;
  uint8_t op = 0;
  uint8_t status = 0;  // AmStatus
  uint16_t reserved = 0;
  int32_t sender = -1;  // rank of the replying target
  uint32_t reserved2 = 0;
  uint64_t token = 0;
  uint64_t value = 0;  // old value for fetching atomics
};
static_assert(std::is_trivially_copyable_v<AmRequest> && sizeof(AmRequest) == 64);
static_assert(std::is_trivially_copyable_v<AmBatch> && sizeof(AmBatch) == 24);
static_assert(std::is_trivially_copyable_v<AmReply> && sizeof(AmReply) == 32);

// Copies a header of exactly sizeof(T) bytes; false for any other length.
template <class T>
bool decode_header(const void* header, size_t header_length, T& out) {
  if (header_length != sizeof(T)) return false;
  std::memcpy(&out, header, sizeof(T));
  return true;
}

// A request the target may look at further: ours, this version, a sender in the job, a known op.
inline bool well_formed(const AmRequest& h, int nranks) {
  return h.magic == kAmMagic && h.version == 1 && h.sender >= 0 && h.sender < nranks &&
         h.op <= static_cast<uint8_t>(Op::Flush);
}

// Payload bytes that follow a request inside a batch.
inline uint64_t payload_bytes(const AmRequest& h) { return h.op == static_cast<uint8_t>(Op::Write) ? h.len : 0; }

// A batch header the target may walk: ours, this version, a sender in the job, and a data length
// equal to what arrived (the rendezvous check is the transport's: it needs UCX's flags).
inline bool well_formed(const AmBatch& b, int nranks, size_t data_length) {
  return b.magic == kAmMagic && b.version == 1 && b.sender >= 0 && b.sender < nranks && b.bytes == data_length;
}

// Where walk_batch stopped: `off` bytes and `count` requests consumed; `malformed` when it stopped
// at a request that is not well_formed (`bad` is that header), else at the end, a truncated
// header or a payload running past the data.
struct BatchWalk {
  size_t off = 0;
  uint32_t count = 0;
  bool malformed = false;
  AmRequest bad{};
  bool complete(size_t length, uint32_t declared) const { return off == length && count == declared; }
};

// Calls on_request(const AmRequest&, size_t payload_offset, size_t payload_bytes) for each
// request of a batch's data in order, until the end or the framing breaks. The payload
// [payload_offset, payload_offset + payload_bytes) lies inside [0, length).
template <class F>
BatchWalk walk_batch(const uint8_t* data, size_t length, int nranks, F&& on_request) {
  BatchWalk w;
  while (w.off < length) {
    AmRequest h;
    if (length - w.off < sizeof h) break;
    std::memcpy(&h, data + w.off, sizeof h);
    if (!well_formed(h, nranks)) {
      w.malformed = true;
      w.bad = h;
      break;
    }
    const uint64_t plen = payload_bytes(h);
    if (plen > length - w.off - sizeof h) break;
    w.off += sizeof h;
    on_request(h, w.off, static_cast<size_t>(plen));
    w.off += static_cast<size_t>(plen);
    ++w.count;
  }
  return w;
}

// Appends one request (and a Write's payload) to a batch's data, as walk_batch reads it.
inline void append_request(std::vector<uint8_t>& buf, const AmRequest& h, const void* payload, size_t count) {
  const size_t at = buf.size();
  buf.resize(at + sizeof(AmRequest) + count);
  std::memcpy(buf.data() + at, &h, sizeof(AmRequest));
  if (count > 0) std::memcpy(buf.data() + at + sizeof(AmRequest), payload, count);
}

}  // namespace rwin::transport::ucx_am

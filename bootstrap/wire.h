// Private to bootstrap/: the TCP store wire format and small socket helpers shared by the store,
// Bootstrap and rwinrun. Not installed, not part of the seam.
//
// Every frame starts with a 12-byte header, all integers little-endian:
//   request:  magic u32 | version u16 | op u16     | body_len u32 | body
//   response: magic u32 | version u16 | status u16 | body_len u32 | body
// A connection starts with a mutual challenge-response (HMAC-SHA256 keyed by the job key; an
// empty key when the job has none, which only a loopback job may use):
//   HELLO client_nonce[32] | rank u32 | nranks u32 | role u16 | flags u16
//         -> server_nonce[32] | server_mac[32]        (the client checks server_mac first)
//   AUTH  client_mac[32] -> (empty)                    (or Error + close: wrong key, duplicate rank)
// server_mac = HMAC(key, "rwin-store-server" | transcript), client_mac = HMAC(key,
// "rwin-store-client" | transcript), transcript = client_nonce | server_nonce | rank | nranks |
// role | flags. Before AUTH succeeds nothing but HELLO then AUTH is accepted.
// Bodies once authenticated (data role):
//   SET   key_len u32 | key | value_len u32 | value      -> (empty)
//   GET   key_len u32 | key                              -> value (parked until the key exists)
//   ADD   key_len u32 | key | delta i64                  -> new value i64
//   CHECK count u32 | count x (key_len u32 | key)        -> count bytes, 1 = exists
//   WAIT  count u32 | count x (key_len u32 | key)        -> (empty, parked until all exist)
// Lease role: the client sends only GOODBYE (empty -> empty); the server pushes EVENT frames
//   (status Event) with body  rank u32 | how_len u32 | how  when a rank's lease closes without
//   a goodbye. A GET/WAIT that cannot be satisfied once a rank failed is answered with status
//   PeerFailed, body count u32 | count x (rank u32 | how_len u32 | how).
// A response with status Error carries a one-line message as its body. Lengths are checked
// against hard caps before any allocation so a hostile length cannot make the server allocate.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "common/blob.h"

namespace rwin::bootstrap::wire {

inline constexpr uint32_t kMagic = 0x54535752;  // "RWST" on the wire (little-endian)
inline constexpr uint16_t kVersion = 2;
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kMaxKey = 4096;
inline constexpr uint32_t kMaxValue = 256u << 20;
inline constexpr uint32_t kMaxKeysPerRequest = 65536;
// CHECK/WAIT bodies: enough for kMaxKeysPerRequest short keys, far below a value-sized body.
inline constexpr uint32_t kMaxKeyListBody = 16u << 20;
inline constexpr uint32_t kMaxSetBody = 4 + kMaxKey + 4 + kMaxValue;
inline constexpr uint32_t kMaxSingleKeyBody = 4 + kMaxKey + 8;

inline constexpr size_t kNonce = 32;
inline constexpr size_t kMac = 32;
inline constexpr uint32_t kHelloBody = kNonce + 4 + 4 + 2 + 2;
// GOODBYE's body: empty for a normal leave; else the reason a rank leaves after an error (it
// counts as failed, and the others are told why: "it left after an error: peer 3 failed ...").
inline constexpr uint32_t kMaxGoodbyeReason = 1024;
inline constexpr uint32_t kHelloReplyBody = kNonce + kMac;
inline constexpr uint32_t kNoRank = 0xFFFFFFFFu;  // a data client that is not a rank (tools, tests)
inline constexpr uint16_t kFlagHasKey = 1;
// Largest server-pushed or failure body a client accepts (ranks x short reasons).
inline constexpr uint32_t kMaxReplyBody = kMaxValue + 64u;

enum class Op : uint16_t { Set = 1, Get = 2, Add = 3, Check = 4, Wait = 5, Hello = 6, Auth = 7, Goodbye = 8 };
enum class Status : uint16_t { Ok = 0, Error = 1, PeerFailed = 2, Event = 3 };
enum class Role : uint16_t { Data = 1, Lease = 2 };

inline const char* op_name(Op op) {
  switch (op) {
    case Op::Set:
      return "set";
    case Op::Get:
      return "get";
    case Op::Add:
      return "add";
    case Op::Check:
      return "check";
    case Op::Wait:
      return "wait";
    case Op::Hello:
      return "hello";
    case Op::Auth:
      return "auth";
    case Op::Goodbye:
      return "goodbye";
  }
  return "unknown";
}

// Largest body a request with this op may declare; 0 for an unknown op.
inline uint32_t max_body(uint16_t op) {
  switch (static_cast<Op>(op)) {
    case Op::Set:
      return kMaxSetBody;
    case Op::Get:
      return 4 + kMaxKey;
    case Op::Add:
      return kMaxSingleKeyBody;
    case Op::Check:
    case Op::Wait:
      return kMaxKeyListBody;
    case Op::Hello:
      return kHelloBody;
    case Op::Auth:
      return kMac;
    case Op::Goodbye:
      return kMaxGoodbyeReason;
  }
  return 0xFFFFFFFFu;  // unknown op: see decode_header
}

// The store's framing on the common little-endian reader/writer (common/blob.h), plus its
// length-prefixed strings: len u32 | bytes.
class Writer : public ::rwin::blob::Writer {
 public:
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
};

// Bounds-checked reader: every accessor returns false instead of reading past the end.
class Reader : public ::rwin::blob::Reader {
 public:
  using ::rwin::blob::Reader::Reader;
  bool str(std::string& s, uint32_t cap) {
    std::span<const uint8_t> b;
    if (!counted(b, cap)) return false;
    s.assign(reinterpret_cast<const char*>(b.data()), b.size());
    return true;
  }
  bool blob(std::vector<uint8_t>& v, uint32_t cap) {
    std::span<const uint8_t> b;
    if (!counted(b, cap)) return false;
    v.assign(b.begin(), b.end());
    return true;
  }

 private:
  bool counted(std::span<const uint8_t>& b, uint32_t cap) {
    uint32_t len = 0;
    return u32(len) && len <= cap && take(len, b);
  }
};

using ::rwin::blob::load_u16;
using ::rwin::blob::load_u32;

// Header for a frame whose body follows in the same buffer (body_len patched by finish()).
inline Writer start_frame(uint16_t op_or_status) {
  Writer w;
  w.u32(kMagic);
  w.u16(kVersion);
  w.u16(op_or_status);
  w.u32(0);
  return w;
}
inline void finish_frame(Writer& w) {
  w.patch_u32(8, static_cast<uint32_t>(w.size() - kHeaderSize));
}

// ---------------------------------------------------------------------------------------------
// Pure decoding (no sockets, no state): the server runs every byte it receives through these,
// and fuzz harnesses call them directly.

struct Header {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t op = 0;  // or status, in a response
  uint32_t body_len = 0;
};

enum class HeaderResult {
  Ok,          // header valid; the body (body_len bytes) may still be arriving
  NeedMore,    // fewer than kHeaderSize bytes
  BadMagic,
  BadVersion,
  UnknownOp,
  NotAllowed,  // a known op this connection may not send in its state (e.g. SET before AUTH)
  TooLong,     // body_len above the op's cap
};

// Which ops a connection may send: before authentication only HELLO (then only AUTH); after it
// a data connection sends SET..WAIT and a lease only GOODBYE.
enum class ConnState { ExpectHello, ExpectAuth, Data, Lease };

inline bool op_allowed(ConnState st, uint16_t op) {
  switch (st) {
    case ConnState::ExpectHello:
      return op == static_cast<uint16_t>(Op::Hello);
    case ConnState::ExpectAuth:
      return op == static_cast<uint16_t>(Op::Auth);
    case ConnState::Data:
      return op >= static_cast<uint16_t>(Op::Set) && op <= static_cast<uint16_t>(Op::Wait);
    case ConnState::Lease:
      return op == static_cast<uint16_t>(Op::Goodbye);
  }
  return false;
}

// Decodes and validates a request header from the first `n` bytes at `p`. On anything but Ok or
// NeedMore, `why` says what was wrong (for the server's log line).
inline HeaderResult decode_header(const uint8_t* p, size_t n, ConnState st, Header& h, std::string& why) {
  if (n < kHeaderSize) return HeaderResult::NeedMore;
  h.magic = load_u32(p);
  h.version = load_u16(p + 4);
  h.op = load_u16(p + 6);
  h.body_len = load_u32(p + 8);
  char buf[160];
  if (h.magic != kMagic) {
    std::snprintf(buf, sizeof buf, "bad magic 0x%08x (not an rwin store client?)", h.magic);
    why = buf;
    return HeaderResult::BadMagic;
  }
  if (h.version != kVersion) {
    std::snprintf(buf, sizeof buf, "protocol version %u, server speaks %u", h.version, kVersion);
    why = buf;
    return HeaderResult::BadVersion;
  }
  if (h.op < static_cast<uint16_t>(Op::Set) || h.op > static_cast<uint16_t>(Op::Goodbye)) {
    std::snprintf(buf, sizeof buf, "unknown op %u", h.op);
    why = buf;
    return HeaderResult::UnknownOp;
  }
  const char* name = op_name(static_cast<Op>(h.op));
  if (!op_allowed(st, h.op)) {
    const char* state = st == ConnState::ExpectHello  ? "before hello"
                        : st == ConnState::ExpectAuth ? "before authentication"
                        : st == ConnState::Data       ? "on a data connection"
                                                      : "on a lease";
    std::snprintf(buf, sizeof buf, "%s not allowed %s", name, state);
    why = buf;
    return HeaderResult::NotAllowed;
  }
  const uint32_t cap = max_body(h.op);
  if (h.body_len > cap) {
    std::snprintf(buf, sizeof buf, "%s body of %u bytes exceeds the %u-byte limit", name, h.body_len, cap);
    why = buf;
    return HeaderResult::TooLong;
  }
  return HeaderResult::Ok;
}

struct Hello {
  uint8_t nonce[kNonce] = {};
  uint32_t rank = kNoRank;
  uint32_t nranks = 0;
  uint16_t role = 0;
  uint16_t flags = 0;
};

// A decoded request body. Only the fields of its op are filled.
struct Request {
  Op op = Op::Set;
  std::string key;                // SET, GET, ADD
  std::vector<uint8_t> value;     // SET
  uint64_t delta = 0;             // ADD
  std::vector<std::string> keys;  // CHECK, WAIT
  Hello hello;                    // HELLO
  uint8_t mac[kMac] = {};         // AUTH
  std::string reason;             // GOODBYE: empty = a normal leave
};

// Decodes the body of a request whose header passed decode_header. False = malformed (inner
// lengths past the end, trailing bytes, a bad role); never reads outside [body, body + len).
inline bool decode_request(Op op, const uint8_t* body, size_t len, Request& out) {
  Reader r(body, len);
  out.op = op;
  switch (op) {
    case Op::Set:
      return r.str(out.key, kMaxKey) && r.blob(out.value, kMaxValue) && r.done();
    case Op::Get:
      return r.str(out.key, kMaxKey) && r.done();
    case Op::Add:
      return r.str(out.key, kMaxKey) && r.u64(out.delta) && r.done();
    case Op::Check:
    case Op::Wait: {
      uint32_t count = 0;
      if (!r.u32(count) || count > kMaxKeysPerRequest) return false;
      // Every key takes at least its 4-byte length: a count the body cannot hold is refused
      // before anything is allocated for it.
      if (count > (len - 4) / 4) return false;
      out.keys.resize(count);
      for (auto& k : out.keys) {
        if (!r.str(k, kMaxKey)) return false;
      }
      return r.done();
    }
    case Op::Hello: {
      if (len != kHelloBody) return false;
      if (!r.bytes(out.hello.nonce) || !r.u32(out.hello.rank) || !r.u32(out.hello.nranks) || !r.u16(out.hello.role) ||
          !r.u16(out.hello.flags))
        return false;
      return out.hello.role == static_cast<uint16_t>(Role::Data) ||
             out.hello.role == static_cast<uint16_t>(Role::Lease);
    }
    case Op::Auth:
      return len == kMac && r.bytes(out.mac);
    case Op::Goodbye:
      out.reason.assign(reinterpret_cast<const char*>(body), len);  // len <= kMaxGoodbyeReason (header check)
      return true;
  }
  return false;
}

// One whole frame at `p` as the server reads it in state `st`: the header is checked before the
// body is awaited (NeedMore), exactly as the server does. `used` = the frame's size on Ok.
enum class Decode { Ok, NeedMore, BadHeader, BadBody };
inline Decode decode_frame(const uint8_t* p, size_t n, ConnState st, Request& out, size_t& used, std::string& why) {
  Header h;
  const HeaderResult hr = decode_header(p, n, st, h, why);
  if (hr == HeaderResult::NeedMore) return Decode::NeedMore;
  if (hr != HeaderResult::Ok) return Decode::BadHeader;
  if (n - kHeaderSize < h.body_len) return Decode::NeedMore;
  if (!decode_request(static_cast<Op>(h.op), p + kHeaderSize, h.body_len, out)) return Decode::BadBody;
  used = kHeaderSize + h.body_len;
  return Decode::Ok;
}

// The client's encoding of a data request (SET..WAIT) or a GOODBYE: the inverse of decode_frame
// for those ops (tests and seed corpora use it; TcpStore writes the same bytes).
inline std::vector<uint8_t> encode_request(const Request& r) {
  Writer w = start_frame(static_cast<uint16_t>(r.op));
  switch (r.op) {
    case Op::Set:
      w.str(r.key);
      w.u32(static_cast<uint32_t>(r.value.size()));
      w.bytes(r.value.data(), r.value.size());
      break;
    case Op::Get:
      w.str(r.key);
      break;
    case Op::Add:
      w.str(r.key);
      w.u64(r.delta);
      break;
    case Op::Check:
    case Op::Wait:
      w.u32(static_cast<uint32_t>(r.keys.size()));
      for (const auto& k : r.keys) w.str(k);
      break;
    case Op::Goodbye:
      w.bytes(r.reason.data(), r.reason.size());
      break;
    case Op::Hello:
    case Op::Auth:
      break;  // handshake frames carry nonces and MACs: see auth.h
  }
  finish_frame(w);
  return std::move(w.buf());
}

// The bytes both MACs cover, in this order.
inline std::vector<uint8_t> transcript(const uint8_t* client_nonce, const uint8_t* server_nonce, const Hello& h) {
  Writer w;
  w.bytes(client_nonce, kNonce);
  w.bytes(server_nonce, kNonce);
  w.u32(h.rank);
  w.u32(h.nranks);
  w.u16(h.role);
  w.u16(h.flags);
  return std::move(w.buf());
}

// Shortens a key for an error message so a 4 KiB key does not flood the log.
inline std::string quote_key(const std::string& key) {
  if (key.size() <= 80) return "'" + key + "'";
  return "'" + key.substr(0, 77) + "...'";
}

using Clock = std::chrono::steady_clock;
inline int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000000000 ? 1000000000 : static_cast<int>(left);
}

}  // namespace rwin::bootstrap::wire

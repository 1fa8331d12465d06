// Private to bootstrap/: the TCP store wire format and small socket helpers shared by the store,
// Bootstrap and rwinrun. Not installed, not part of the seam.
//
// Every frame starts with a 12-byte header, all integers little-endian:
//   request:  magic u32 | version u16 | op u16     | body_len u32 | body
//   response: magic u32 | version u16 | status u16 | body_len u32 | body
// Bodies:
//   SET   key_len u32 | key | value_len u32 | value      -> (empty)
//   GET   key_len u32 | key                              -> value (parked until the key exists)
//   ADD   key_len u32 | key | delta i64                  -> new value i64
//   CHECK count u32 | count x (key_len u32 | key)        -> count bytes, 1 = exists
//   WAIT  count u32 | count x (key_len u32 | key)        -> (empty, parked until all exist)
// A response with status Error carries a one-line message as its body. Lengths are checked
// against hard caps before any allocation so a hostile length cannot make the server allocate.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace rwin::bootstrap::wire {

inline constexpr uint32_t kMagic = 0x54535752;  // "RWST" on the wire (little-endian)
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kMaxKey = 4096;
inline constexpr uint32_t kMaxValue = 256u << 20;
inline constexpr uint32_t kMaxKeysPerRequest = 65536;
// CHECK/WAIT bodies: enough for kMaxKeysPerRequest short keys, far below a value-sized body.
inline constexpr uint32_t kMaxKeyListBody = 16u << 20;
inline constexpr uint32_t kMaxSetBody = 4 + kMaxKey + 4 + kMaxValue;
inline constexpr uint32_t kMaxSingleKeyBody = 4 + kMaxKey + 8;

enum class Op : uint16_t { Set = 1, Get = 2, Add = 3, Check = 4, Wait = 5 };
enum class Status : uint16_t { Ok = 0, Error = 1 };

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
  }
  return 0;
}

class Writer {
 public:
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  std::vector<uint8_t>& buf() { return buf_; }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> buf_;
};

// Bounds-checked reader: every accessor returns false instead of reading past the end.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool u16(uint16_t& v) { return get(v, 2); }
  bool u32(uint32_t& v) { return get(v, 4); }
  bool u64(uint64_t& v) { return get(v, 8); }
  bool str(std::string& s, uint32_t cap) {
    uint32_t len = 0;
    if (!u32(len) || len > cap || len > n_ - off_) return false;
    s.assign(reinterpret_cast<const char*>(p_ + off_), len);
    off_ += len;
    return true;
  }
  bool blob(std::vector<uint8_t>& b, uint32_t cap) {
    uint32_t len = 0;
    if (!u32(len) || len > cap || len > n_ - off_) return false;
    b.assign(p_ + off_, p_ + off_ + len);
    off_ += len;
    return true;
  }
  bool done() const { return off_ == n_; }

 private:
  template <class T>
  bool get(T& v, int n) {
    if (n_ - off_ < static_cast<size_t>(n)) return false;
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) x |= static_cast<uint64_t>(p_[off_ + i]) << (8 * i);
    v = static_cast<T>(x);
    off_ += n;
    return true;
  }
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
};

inline uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint16_t load_u16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

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
  const uint32_t len = static_cast<uint32_t>(w.buf().size() - kHeaderSize);
  for (int i = 0; i < 4; ++i) w.buf()[8 + i] = static_cast<uint8_t>(len >> (8 * i));
}

// ---- Request decoding: pure, so the server and the fuzzer (tests/fuzz) run the same code ----

struct Header {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint16_t op = 0;  // op of a request, status of a response
  uint32_t body_len = 0;
};
// `p` holds at least kHeaderSize bytes.
inline Header load_header(const uint8_t* p) { return Header{load_u32(p), load_u16(p + 4), load_u16(p + 6), load_u32(p + 8)}; }

enum class HeaderCheck { Ok, BadMagic, BadVersion, UnknownOp, TooLong };
// What the server checks before it waits for a body: ours, this version, a known op, and a
// declared body within that op's cap (so nothing is buffered or allocated for a hostile length).
inline HeaderCheck check_request_header(const Header& h) {
  if (h.magic != kMagic) return HeaderCheck::BadMagic;
  if (h.version != kVersion) return HeaderCheck::BadVersion;
  const uint32_t cap = max_body(h.op);
  if (cap == 0) return HeaderCheck::UnknownOp;
  if (h.body_len > cap) return HeaderCheck::TooLong;
  return HeaderCheck::Ok;
}

// One decoded request. keys: one for SET/GET/ADD, the list for CHECK/WAIT.
struct Request {
  Op op = Op::Get;
  std::vector<std::string> keys;
  std::vector<uint8_t> value;  // SET
  uint64_t delta = 0;          // ADD (two's complement of the i64)
};

// Decodes the body of a request whose header passed check_request_header; false when it is
// malformed (a length past the end or over its cap, too many keys, trailing bytes).
inline bool decode_request_body(Op op, const uint8_t* body, size_t len, Request& out) {
  Reader r(body, len);
  out = Request{};
  out.op = op;
  switch (op) {
    case Op::Set:
      out.keys.resize(1);
      return r.str(out.keys[0], kMaxKey) && r.blob(out.value, kMaxValue) && r.done();
    case Op::Get:
      out.keys.resize(1);
      return r.str(out.keys[0], kMaxKey) && r.done();
    case Op::Add:
      out.keys.resize(1);
      return r.str(out.keys[0], kMaxKey) && r.u64(out.delta) && r.done();
    case Op::Check:
    case Op::Wait: {
      uint32_t count = 0;
      if (!r.u32(count) || count > kMaxKeysPerRequest) return false;
      // Each key takes at least its 4-byte length: reserve no more than the body can hold.
      out.keys.reserve(count < len / 4 ? count : len / 4);
      for (uint32_t i = 0; i < count; ++i) {
        std::string k;
        if (!r.str(k, kMaxKey)) return false;
        out.keys.push_back(std::move(k));
      }
      return r.done();
    }
  }
  return false;
}

// One whole request frame at the start of [p, p + n): header checked, body decoded. `used` is
// the frame's length. NeedMore when the frame is not complete yet (the server waits for it).
enum class Decode { Ok, NeedMore, BadHeader, BadBody };
inline Decode decode_request(const uint8_t* p, size_t n, Request& out, size_t& used) {
  if (n < kHeaderSize) return Decode::NeedMore;
  const Header h = load_header(p);
  if (check_request_header(h) != HeaderCheck::Ok) return Decode::BadHeader;
  if (n - kHeaderSize < h.body_len) return Decode::NeedMore;
  if (!decode_request_body(static_cast<Op>(h.op), p + kHeaderSize, h.body_len, out)) return Decode::BadBody;
  used = kHeaderSize + h.body_len;
  return Decode::Ok;
}

// The frame TcpStore's client writes for `req` (the inverse of decode_request).
inline std::vector<uint8_t> encode_request(const Request& req) {
  Writer w;
  w.u32(kMagic);
  w.u16(kVersion);
  w.u16(static_cast<uint16_t>(req.op));
  w.u32(0);
  switch (req.op) {
    case Op::Set:
      w.str(req.keys.at(0));
      w.u32(static_cast<uint32_t>(req.value.size()));
      w.bytes(req.value.data(), req.value.size());
      break;
    case Op::Get:
      w.str(req.keys.at(0));
      break;
    case Op::Add:
      w.str(req.keys.at(0));
      w.u64(req.delta);
      break;
    case Op::Check:
    case Op::Wait:
      w.u32(static_cast<uint32_t>(req.keys.size()));
      for (const auto& k : req.keys) w.str(k);
      break;
  }
  const uint32_t len = static_cast<uint32_t>(w.buf().size() - kHeaderSize);
  for (int i = 0; i < 4; ++i) w.buf()[8 + i] = static_cast<uint8_t>(len >> (8 * i));
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

// The one little-endian reader/writer every hand-made wire format uses (the bootstrap store
// frames, the verbs blobs, the UCX key and address blobs, the window descriptor). Internal, header
// only. The Reader never reads past the end of its input: a read that does not fit returns false,
// leaves its output alone and makes the reader "failed" for good, so a chain of reads can be
// checked once; done() says the input was consumed exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

namespace rwin::blob {

inline uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}
inline uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
inline uint64_t load_u64(const uint8_t* p) {
  return uint64_t(load_u32(p)) | uint64_t(load_u32(p + 4)) << 32;
}

class Writer {
 public:
  Writer() = default;
  explicit Writer(size_t reserve) { buf_.reserve(reserve); }
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(std::span<const uint8_t> b) { buf_.insert(buf_.end(), b.begin(), b.end()); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  // Overwrites 4 bytes already written at `at` (a length known only once the rest is written).
  void patch_u32(size_t at, uint32_t v) {
    if (at > buf_.size() || buf_.size() - at < 4) throw std::out_of_range("blob::Writer::patch_u32 past the end");
    for (size_t i = 0; i < 4; ++i) buf_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& buf() { return buf_; }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  void put(uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  Reader(const uint8_t* p, size_t n) : in_(p, n) {}

  bool u8(uint8_t& v) { return get(v, 1); }
  bool u16(uint16_t& v) { return get(v, 2); }
  bool u32(uint32_t& v) { return get(v, 4); }
  bool u64(uint64_t& v) { return get(v, 8); }
  // Copies out.size() bytes.
  bool bytes(std::span<uint8_t> out) {
    std::span<const uint8_t> s;
    if (!take(out.size(), s)) return false;
    if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
    return true;
  }
  // The next `n` bytes, in place (no copy); n is 64-bit so a hostile length is checked, not cut.
  bool take(uint64_t n, std::span<const uint8_t>& out) {
    if (!fits(n)) return false;
    out = in_.subspan(off_, static_cast<size_t>(n));
    off_ += static_cast<size_t>(n);
    return true;
  }

  size_t remaining() const { return in_.size() - off_; }
  // Everything not read yet, in place; does not consume it.
  std::span<const uint8_t> rest() const { return in_.subspan(off_); }
  bool failed() const { return failed_; }
  // Every read succeeded and the input is consumed exactly.
  bool done() const { return !failed_ && off_ == in_.size(); }

 private:
  bool fits(uint64_t n) {
    if (failed_ || n > remaining()) {
      failed_ = true;
      return false;
    }
    return true;
  }
  template <class T>
  bool get(T& v, size_t n) {
    if (!fits(n)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) x |= static_cast<uint64_t>(in_[off_ + i]) << (8 * i);
    v = static_cast<T>(x);
    off_ += n;
    return true;
  }
  std::span<const uint8_t> in_;
  size_t off_ = 0;
  bool failed_ = false;
};

}  // namespace rwin::blob

#include "window_blob.h"

#include <cstring>

namespace rwin::detail {

std::vector<uint8_t> window_blob(const std::string& name, DType dtype, Shape2 shape, BlobKind kind,
                                 std::span<const uint8_t> key) {
  std::vector<uint8_t> b;
  auto put = [&b](const void* p, size_t n) { b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); };
  const uint32_t magic = kWindowMagic, version = kWindowVersion, name_len = static_cast<uint32_t>(name.size());
  const uint8_t dt = static_cast<uint8_t>(dtype), sig = static_cast<uint8_t>(kind);
  const uint64_t key_len = key.size();
  put(&magic, 4);
  put(&version, 4);
  put(&dt, 1);
  put(&sig, 1);
  put(&shape[0], 8);
  put(&shape[1], 8);
  put(&name_len, 4);
  put(name.data(), name_len);
  put(&key_len, 8);
  put(key.data(), key.size());
  return b;
}

std::optional<WindowDesc> parse_window_blob(std::span<const uint8_t> b) {
  size_t off = 0;
  auto get = [&](void* p, size_t n) {
    if (off + n > b.size()) return false;
    std::memcpy(p, b.data() + off, n);
    off += n;
    return true;
  };
  uint32_t magic = 0, version = 0, name_len = 0;
  uint8_t dtype = 0, kind = 0;
  uint64_t key_len = 0;
  WindowDesc d{};
  if (!get(&magic, 4) || !get(&version, 4) || magic != kWindowMagic || version != kWindowVersion) return std::nullopt;
  // Exactly the codes of a DType (dtype_size is 0 for any other byte).
  if (!get(&dtype, 1) || !get(&kind, 1) || dtype_size(static_cast<DType>(dtype)) == 0 ||
      kind > static_cast<uint8_t>(BlobKind::Buffer)) {
    return std::nullopt;
  }
  if (!get(&d.shape[0], 8) || !get(&d.shape[1], 8) || !get(&name_len, 4) || off + name_len > b.size()) return std::nullopt;
  d.name.assign(reinterpret_cast<const char*>(b.data() + off), name_len);
  off += name_len;
  if (!get(&key_len, 8) || off + key_len != b.size()) return std::nullopt;
  d.dtype = static_cast<DType>(dtype);
  d.kind = static_cast<BlobKind>(kind);
  d.key = b.subspan(off);
  return d;
}

std::string describe_window_desc(const WindowDesc& d) {
  if (d.kind == BlobKind::Buffer) {
    if (d.shape[0] != 1 || d.shape[1] < 0) return "buffer '" + d.name + "' (not a valid size)";
    return "buffer '" + d.name + "' (" + std::to_string(d.shape[1]) + " bytes)";
  }
  std::string s = "'" + d.name + "' " + dtype_name(d.dtype) + "[" + std::to_string(d.shape[0]) + "x" +
                  std::to_string(d.shape[1]) + "]";
  int64_t elems = 0;
  uint64_t bytes = 0;
  if (d.shape[0] < 0 || d.shape[1] < 0 || __builtin_mul_overflow(d.shape[0], d.shape[1], &elems) ||
      __builtin_mul_overflow(static_cast<uint64_t>(elems), dtype_size(d.dtype), &bytes)) {
    return s + " (not a valid size)";
  }
  return s + " (" + std::to_string(bytes) + " bytes)";
}

}  // namespace rwin::detail

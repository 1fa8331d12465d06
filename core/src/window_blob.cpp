#include "window_blob.h"

#include <bit>

#include "common/blob.h"

namespace rwin::detail {

// "Host byte order" (window_blob.h) has always been little endian; the common little-endian
// writer keeps the descriptor byte for byte what it was.
static_assert(std::endian::native == std::endian::little, "the window descriptor was host order: little endian only");

std::vector<uint8_t> window_blob(const std::string& name, DType dtype, Shape2 shape, BlobKind kind,
                                 std::span<const uint8_t> key) {
  blob::Writer w(4 + 4 + 1 + 1 + 8 + 8 + 4 + name.size() + 8 + key.size());
  w.u32(kWindowMagic);
  w.u32(kWindowVersion);
  w.u8(static_cast<uint8_t>(dtype));
  w.u8(static_cast<uint8_t>(kind));
  w.u64(static_cast<uint64_t>(shape[0]));
  w.u64(static_cast<uint64_t>(shape[1]));
  w.u32(static_cast<uint32_t>(name.size()));
  w.bytes(name.data(), name.size());
  w.u64(key.size());
  w.bytes(key);
  return w.take();
}

std::optional<WindowDesc> parse_window_blob(std::span<const uint8_t> b) {
  blob::Reader r(b);
  uint32_t magic = 0, version = 0, name_len = 0;
  uint8_t dtype = 0, kind = 0;
  uint64_t shape0 = 0, shape1 = 0, key_len = 0;
  std::span<const uint8_t> name;
  WindowDesc d{};
  if (!r.u32(magic) || !r.u32(version) || magic != kWindowMagic || version != kWindowVersion) return std::nullopt;
  // Exactly the codes of a DType (dtype_size is 0 for any other byte).
  if (!r.u8(dtype) || !r.u8(kind) || dtype_size(static_cast<DType>(dtype)) == 0 ||
      kind > static_cast<uint8_t>(BlobKind::Buffer)) {
    return std::nullopt;
  }
  if (!r.u64(shape0) || !r.u64(shape1) || !r.u32(name_len) || !r.take(name_len, name)) return std::nullopt;
  if (!r.u64(key_len) || key_len != r.remaining()) return std::nullopt;
  d.shape = {static_cast<int64_t>(shape0), static_cast<int64_t>(shape1)};
  d.name.assign(reinterpret_cast<const char*>(name.data()), name.size());
  d.dtype = static_cast<DType>(dtype);
  d.kind = static_cast<BlobKind>(kind);
  d.key = r.rest();
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

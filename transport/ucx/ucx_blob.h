// The two blobs the UCX transport puts on the wire through the bootstrap, host byte order:
//   key blob (MemoryRegion::packed_key):  magic "RWKU" u32 | version u32 | base u64 | bytes u64 |
//                                         raw_len u64 | ucp_rkey_pack output (raw_len bytes)
//   address blob (connect):               magic "RWAU" u32 | version u32 | addr_len u64 | worker address |
//                                         probe_base u64 | probe_len u64 | probe rkey (probe_len bytes)
// Pure and free of <ucp/api/ucp.h> so the fuzzer (tests/fuzz) and unit tests run the real
// decoders; what UCX makes of the opaque parts is UCX's to check.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

namespace rwin::transport::ucx_blob {

inline constexpr uint32_t kKeyMagic = 0x52574b55;   // "RWKU": rwin key, ucx
inline constexpr uint32_t kAddrMagic = 0x52574155;  // "RWAU": rwin address, ucx
inline constexpr uint16_t kBlobVersion = 2;         // 2: the address blob carries a probe rkey

inline void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4);
}
inline void put_u64(std::vector<uint8_t>& b, uint64_t v) {
  b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8);
}
template <class T>
T get_pod(std::span<const uint8_t> b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

struct KeyBlob {
  uint64_t base = 0;                   // the owner's address of byte 0
  uint64_t bytes = 0;                  // length of the region
  std::span<const uint8_t> raw;        // ucp_rkey_pack output, inside the parsed blob
};

inline std::vector<uint8_t> pack_key(uint64_t base, uint64_t bytes, std::span<const uint8_t> raw) {
  std::vector<uint8_t> b;
  b.reserve(32 + raw.size());
  put_u32(b, kKeyMagic);
  put_u32(b, kBlobVersion);
  put_u64(b, base);
  put_u64(b, bytes);
  put_u64(b, raw.size());
  b.insert(b.end(), raw.begin(), raw.end());
  return b;
}

// nullopt unless `b` is exactly one key blob of this version.
inline std::optional<KeyBlob> parse_key(std::span<const uint8_t> b) {
  if (b.size() < 32 || get_pod<uint32_t>(b, 0) != kKeyMagic || get_pod<uint32_t>(b, 4) != kBlobVersion ||
      get_pod<uint64_t>(b, 24) != b.size() - 32) {
    return std::nullopt;
  }
  return KeyBlob{get_pod<uint64_t>(b, 8), get_pod<uint64_t>(b, 16), b.subspan(32)};
}

struct AddrBlob {
  std::span<const uint8_t> address;    // ucp_worker_get_address output, inside the parsed blob
  uint64_t probe_base = 0;             // 0 without a probe region
  std::span<const uint8_t> probe_key;  // empty without a probe region
};

inline std::vector<uint8_t> pack_addr(std::span<const uint8_t> address, uint64_t probe_base,
                                      std::span<const uint8_t> probe_key) {
  std::vector<uint8_t> b;
  b.reserve(32 + address.size() + probe_key.size());
  put_u32(b, kAddrMagic);
  put_u32(b, kBlobVersion);
  put_u64(b, address.size());
  b.insert(b.end(), address.begin(), address.end());
  put_u64(b, probe_base);
  put_u64(b, probe_key.size());
  b.insert(b.end(), probe_key.begin(), probe_key.end());
  return b;
}

// nullopt unless `b` is exactly one address blob of this version.
inline std::optional<AddrBlob> parse_addr(std::span<const uint8_t> b) {
  if (b.size() < 16 || get_pod<uint32_t>(b, 0) != kAddrMagic || get_pod<uint32_t>(b, 4) != kBlobVersion) {
    return std::nullopt;
  }
  const uint64_t alen = get_pod<uint64_t>(b, 8);
  if (alen > b.size() - 16 || b.size() - 16 - alen < 16) return std::nullopt;
  const size_t probe_at = 16 + static_cast<size_t>(alen);
  AddrBlob a;
  a.address = b.subspan(16, static_cast<size_t>(alen));
  a.probe_base = get_pod<uint64_t>(b, probe_at);
  const uint64_t probe_len = get_pod<uint64_t>(b, probe_at + 8);
  if (probe_len != b.size() - probe_at - 16) return std::nullopt;
  a.probe_key = b.subspan(probe_at + 16);
  return a;
}

}  // namespace rwin::transport::ucx_blob

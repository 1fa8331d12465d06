// The two blobs the UCX transport puts on the wire through the bootstrap, host byte order:
//   key blob (MemoryRegion::packed_key):  magic "RWKU" u32 | version u32 | base u64 | bytes u64 |
//                                         raw_len u64 | ucp_rkey_pack output (raw_len bytes)
//   address blob (connect):               magic "RWAU" u32 | version u32 | addr_len u64 | worker address |
//                                         probe_base u64 | probe_len u64 | probe rkey (probe_len bytes)
// Pure and free of <ucp/api/ucp.h> so the fuzzer (tests/fuzz) and unit tests run the real
// decoders; what UCX makes of the opaque parts is UCX's to check.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/blob.h"

namespace rwin::transport::ucx_blob {

inline constexpr uint32_t kKeyMagic = 0x52574b55;   // "RWKU": rwin key, ucx
inline constexpr uint32_t kAddrMagic = 0x52574155;  // "RWAU": rwin address, ucx
inline constexpr uint16_t kBlobVersion = 2;         // 2: the address blob carries a probe rkey

// "Host byte order" above has always been little endian (every host rwin builds for); the common
// little-endian writer keeps these blobs byte for byte what they were.
static_assert(std::endian::native == std::endian::little, "ucx blobs were host order: little endian only");

struct KeyBlob {
  uint64_t base = 0;                   // the owner's address of byte 0
  uint64_t bytes = 0;                  // length of the region
  std::span<const uint8_t> raw;        // ucp_rkey_pack output, inside the parsed blob
};

inline std::vector<uint8_t> pack_key(uint64_t base, uint64_t bytes, std::span<const uint8_t> raw) {
  blob::Writer w(32 + raw.size());
  w.u32(kKeyMagic);
  w.u32(kBlobVersion);
  w.u64(base);
  w.u64(bytes);
  w.u64(raw.size());
  w.bytes(raw);
  return w.take();
}

// nullopt unless `b` is exactly one key blob of this version.
inline std::optional<KeyBlob> parse_key(std::span<const uint8_t> b) {
  blob::Reader r(b);
  uint32_t magic = 0, version = 0;
  uint64_t raw_len = 0;
  KeyBlob k;
  if (!r.u32(magic) || !r.u32(version) || !r.u64(k.base) || !r.u64(k.bytes) || !r.u64(raw_len) || magic != kKeyMagic ||
      version != kBlobVersion || raw_len != r.remaining()) {
    return std::nullopt;
  }
  k.raw = r.rest();
  return k;
}

struct AddrBlob {
  std::span<const uint8_t> address;    // ucp_worker_get_address output, inside the parsed blob
  uint64_t probe_base = 0;             // 0 without a probe region
  std::span<const uint8_t> probe_key;  // empty without a probe region
};

inline std::vector<uint8_t> pack_addr(std::span<const uint8_t> address, uint64_t probe_base,
                                      std::span<const uint8_t> probe_key) {
  blob::Writer w(32 + address.size() + probe_key.size());
  w.u32(kAddrMagic);
  w.u32(kBlobVersion);
  w.u64(address.size());
  w.bytes(address);
  w.u64(probe_base);
  w.u64(probe_key.size());
  w.bytes(probe_key);
  return w.take();
}

// nullopt unless `b` is exactly one address blob of this version.
inline std::optional<AddrBlob> parse_addr(std::span<const uint8_t> b) {
  blob::Reader r(b);
  uint32_t magic = 0, version = 0;
  uint64_t alen = 0, probe_len = 0;
  AddrBlob a;
  if (!r.u32(magic) || !r.u32(version) || magic != kAddrMagic || version != kBlobVersion || !r.u64(alen) ||
      !r.take(alen, a.address) || !r.u64(a.probe_base) || !r.u64(probe_len) || probe_len != r.remaining()) {
    return std::nullopt;
  }
  a.probe_key = r.rest();
  return a;
}

}  // namespace rwin::transport::ucx_blob

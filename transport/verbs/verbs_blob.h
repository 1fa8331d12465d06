// The two versioned blobs the verbs transport puts on the wire through the bootstrap:
//   ConnBlob  one per queue pair: what the peer needs to move its QP to RTR (qpn, psn, gid, lid, mtu)
//   KeyBlob   MemoryRegion::packed_key(): what a peer needs to address our region (addr, length, rkey)
// Header-only and free of <infiniband/verbs.h> so unit tests can check it without a device.
// Encoding: fixed layout, little endian, a header of magic (u32), version (u16), total length (u16).
// unpack() rejects anything that is not exactly what this build writes and says why.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace rwin::transport::verbs {

namespace blob_detail {

class Writer {
 public:
  explicit Writer(size_t reserve) { out_.reserve(reserve); }
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  uint8_t u8() { return static_cast<uint8_t>(get(1)); }
  uint16_t u16() { return static_cast<uint16_t>(get(2)); }
  uint32_t u32() { return static_cast<uint32_t>(get(4)); }
  uint64_t u64() { return get(8); }
  void bytes(std::span<uint8_t> out) {
    for (auto& b : out) b = u8();
  }

 private:
  // Callers check the total length first, so this never reads past the end.
  uint64_t get(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{in_[pos_ + i]} << (8 * i);
    pos_ += n;
    return v;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

inline std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Checks the common header; `what` names the blob in the message ("verbs connection blob").
inline Reader check_header(std::span<const uint8_t> in, const char* what, uint32_t magic, uint16_t version,
                           size_t total) {
  constexpr size_t kHeader = 8;
  if (in.size() < kHeader) {
    throw TransportError(std::string(what) + " truncated: " + std::to_string(in.size()) +
                         " bytes, the header alone needs " + std::to_string(kHeader));
  }
  Reader r(in);
  const uint32_t got_magic = r.u32();
  const uint16_t got_version = r.u16();
  const uint16_t got_length = r.u16();
  if (got_magic != magic) {
    throw TransportError(std::string(what) + " has bad magic " + hex32(got_magic) + ", expected " + hex32(magic) +
                         " (not a verbs blob, or a different transport)");
  }
  if (got_version != version) {
    throw TransportError(std::string(what) + " has version " + std::to_string(got_version) +
                         ", this build speaks version " + std::to_string(version) + " (mixed rwin builds in one job?)");
  }
  if (got_length != total || in.size() != total) {
    throw TransportError(std::string(what) + " length mismatch: header says " + std::to_string(got_length) +
                         " bytes, received " + std::to_string(in.size()) + ", version " + std::to_string(version) +
                         " is " + std::to_string(total));
  }
  return r;
}

inline void put_header(Writer& w, uint32_t magic, uint16_t version, size_t total) {
  w.u32(magic);
  w.u16(version);
  w.u16(static_cast<uint16_t>(total));
}

}  // namespace blob_detail

// What one side of a queue pair tells the other before both move to RTR.
struct ConnBlob {
  static constexpr uint32_t kMagic = 0x50515752;  // "RWQP" little endian
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kBytes = 8 + 4 * 4 + 2 + 1 + 1 + 16;

  uint32_t rank = 0;       // sender
  uint32_t peer = 0;       // intended receiver: catches a blob delivered to the wrong rank
  uint32_t qpn = 0;        // sender's QP number for this pair
  uint32_t psn = 0;        // sender's initial send PSN (24 bits)
  uint16_t lid = 0;        // port LID (IB); 0 on RoCE
  uint8_t mtu = 0;         // sender port's active_mtu as enum ibv_mtu (1 = 256 ... 5 = 4096)
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_* of the sender's port: both sides must agree
  std::array<uint8_t, 16> gid{};

  std::vector<uint8_t> pack() const {
    blob_detail::Writer w(kBytes);
    blob_detail::put_header(w, kMagic, kVersion, kBytes);
    w.u32(rank);
    w.u32(peer);
    w.u32(qpn);
    w.u32(psn);
    w.u16(lid);
    w.u8(mtu);
    w.u8(link_layer);
    w.bytes(gid);
    return w.take();
  }

  // Throws TransportError saying what is wrong (truncated, magic, version, length).
  static ConnBlob unpack(std::span<const uint8_t> in) {
    auto r = blob_detail::check_header(in, "verbs connection blob", kMagic, kVersion, kBytes);
    ConnBlob b;
    b.rank = r.u32();
    b.peer = r.u32();
    b.qpn = r.u32();
    b.psn = r.u32();
    b.lid = r.u16();
    b.mtu = r.u8();
    b.link_layer = r.u8();
    r.bytes(b.gid);
    return b;
  }
};

// MemoryRegion::packed_key() of the verbs transport.
struct KeyBlob {
  static constexpr uint32_t kMagic = 0x4b4d5752;  // "RWMK" little endian
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kBytes = 8 + 8 + 8 + 4;

  uint64_t addr = 0;   // the owner's virtual address of byte 0 (what RDMA work requests target)
  uint64_t bytes = 0;  // length of the region
  uint32_t rkey = 0;

  std::vector<uint8_t> pack() const {
    blob_detail::Writer w(kBytes);
    blob_detail::put_header(w, kMagic, kVersion, kBytes);
    w.u64(addr);
    w.u64(bytes);
    w.u32(rkey);
    return w.take();
  }

  static KeyBlob unpack(std::span<const uint8_t> in) {
    auto r = blob_detail::check_header(in, "verbs memory key blob", kMagic, kVersion, kBytes);
    KeyBlob k;
    k.addr = r.u64();
    k.bytes = r.u64();
    k.rkey = r.u32();
    if (k.bytes > UINT64_MAX - k.addr) {
      throw TransportError("verbs memory key blob describes a region that wraps the address space: addr " +
                           std::to_string(k.addr) + ", " + std::to_string(k.bytes) + " bytes");
    }
    return k;
  }
};

}  // namespace rwin::transport::verbs

// The versioned blobs the verbs transport puts on the wire:
//   ConnBlob      one per queue pair of the collective connect (through the bootstrap): what the
//                 peer needs to move its QP to RTR (qpn, psn, gid, lid, mtu)
//   EndpointBlob  the same for a run-time peer (local_endpoint(), carried by the caller)
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

#include "common/blob.h"
#include "transport/transport.h"

namespace rwin::transport::verbs {

namespace blob_detail {

using Writer = ::rwin::blob::Writer;
using Reader = ::rwin::blob::Reader;

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
  uint32_t got_magic = 0;
  uint16_t got_version = 0, got_length = 0;
  r.u32(got_magic);  // cannot fail: the header's 8 bytes are there
  r.u16(got_version);
  r.u16(got_length);
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

// After the fields: a layout that no longer matches kBytes is a bug in this file, not bad input.
inline void check_consumed(const Reader& r, const char* what) {
  if (!r.done()) throw TransportError(std::string(what) + " decoder does not match its own layout (rwin bug)");
}

inline void put_header(Writer& w, uint32_t magic, uint16_t version, size_t total) {
  w.u32(magic);
  w.u16(version);
  w.u16(static_cast<uint16_t>(total));
}

// Every blob B below states its layout once, as B::fields(io, blob): the same list of fields
// written by a Writer (pack) and read by a Reader (unpack). B also names itself (kWhat) and its
// header (kMagic, kVersion, kBytes).
template <class B>
std::vector<uint8_t> pack(const B& b) {
  Writer w(B::kBytes);
  put_header(w, B::kMagic, B::kVersion, B::kBytes);
  B::fields(w, b);
  return w.take();
}

// Throws TransportError saying what is wrong (truncated, magic, version, length).
template <class B>
B unpack(std::span<const uint8_t> in) {
  auto r = check_header(in, B::kWhat, B::kMagic, B::kVersion, B::kBytes);
  B b;
  B::fields(r, b);  // check_header checked the length, so these reads consume the blob exactly
  check_consumed(r, B::kWhat);
  return b;
}

}  // namespace blob_detail

// What one side of a queue pair tells the other before both move to RTR: the part both connection
// blobs carry, in this order.
// Version 2 added gid_type and the two RDMA read/atomic depths; version 3 the flush target;
// version 4 the QP's lane, the sender's lane count and the QP's device (striping, several devices);
// older versions are refused by name.
struct QpAddress {
  static constexpr size_t kBytes = 4 + 4 + 2 + 1 + 1 + 16 + 4 + 8 + 4 + 4;
  uint32_t qpn = 0;        // sender's QP number for this pair
  uint32_t psn = 0;        // sender's initial send PSN (24 bits)
  uint16_t lid = 0;        // port LID (IB); 0 on RoCE
  uint8_t mtu = 0;         // sender port's active_mtu as enum ibv_mtu (1 = 256 ... 5 = 4096)
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_* of the sender's port: both sides must agree
  std::array<uint8_t, 16> gid{};
  uint8_t gid_type = 0;      // GidType of the sender's GID (0 unknown: a kernel without GID types)
  uint8_t rd_atomic_init = 0;  // sender's max_qp_init_rd_atom, capped (verbs_params.h, rd_atomic_limits)
  uint8_t rd_atomic_resp = 0;  // sender's max_qp_rd_atom (responder resources), capped
  uint8_t lane = 0;  // which of the sender's QPs to this peer (0 .. lanes-1): pairs lane i with lane i
  // A registered word of the sender's that the other side's flush (a zero-length RDMA READ) names.
  // The IBA lets a zero-length request carry any R_Key, but a responder that replays a
  // retransmitted READ may look its R_Key up again (rxe does: rkey 0 then fails with an R_Key
  // violation and moves the responder's QP to ERR); a real key is valid on every device.
  uint64_t flush_addr = 0;
  uint32_t flush_rkey = 0;  // valid on the sender's device `rail`
  uint16_t lanes = 1;  // QPs the sender has to this peer (RWIN_VERBS_QPS_PER_PEER x devices): both sides agree
  uint8_t rail = 0;    // which of the sender's devices (RWIN_IB_HCA order) holds this QP: its KeyBlob rkey index
  uint8_t reserved = 0;

  template <class IO, class Self>
  static void fields(IO& io, Self& s) {
    io.u32(s.qpn);
    io.u32(s.psn);
    io.u16(s.lid);
    io.u8(s.mtu);
    io.u8(s.link_layer);
    io.bytes(s.gid);
    io.u8(s.gid_type);
    io.u8(s.rd_atomic_init);
    io.u8(s.rd_atomic_resp);
    io.u8(s.lane);
    io.u64(s.flush_addr);
    io.u32(s.flush_rkey);
    io.u16(s.lanes);
    io.u8(s.rail);
    io.u8(s.reserved);
  }
};

// The collective connect's blob (one per ordered pair of ranks, through the bootstrap).
struct ConnBlob : QpAddress {
  static constexpr const char* kWhat = "verbs connection blob";
  static constexpr uint32_t kMagic = 0x50515752;  // "RWQP" little endian
  static constexpr uint16_t kVersion = 4;
  static constexpr size_t kBytes = 8 + 4 + 4 + QpAddress::kBytes;
  uint32_t rank = 0;  // sender
  uint32_t peer = 0;  // intended receiver: catches a blob delivered to the wrong rank

  template <class IO, class Self>
  static void fields(IO& io, Self& s) {
    io.u32(s.rank);
    io.u32(s.peer);
    QpAddress::fields(io, s);
  }
  std::vector<uint8_t> pack() const { return blob_detail::pack(*this); }
  static ConnBlob unpack(std::span<const uint8_t> in) { return blob_detail::unpack<ConnBlob>(in); }
};

// Transport::local_endpoint() of a transport with run-time peers (TransportConfig::dynamic_peers).
// Ranks mean nothing there: the blob names the sending transport by a random 64-bit instance id
// and its peer slot, which messages on the other side quote ("endpoint of instance 0x... slot
// 3"). Its own magic: one kind of connection blob is never taken for the other.
struct EndpointBlob : QpAddress {
  static constexpr const char* kWhat = "verbs endpoint blob";
  static constexpr uint32_t kMagic = 0x50455752;  // "RWEP" little endian
  static constexpr uint16_t kVersion = 4;
  static constexpr size_t kBytes = 8 + 8 + 4 + QpAddress::kBytes;
  uint64_t instance = 0;  // random per VerbsTransport object
  uint32_t slot = 0;      // the sender's index for this connection (its add_peer() result)

  template <class IO, class Self>
  static void fields(IO& io, Self& s) {
    io.u64(s.instance);
    io.u32(s.slot);
    QpAddress::fields(io, s);
  }
  std::vector<uint8_t> pack() const { return blob_detail::pack(*this); }
  static EndpointBlob unpack(std::span<const uint8_t> in) { return blob_detail::unpack<EndpointBlob>(in); }
};

// MemoryRegion::packed_key() of the verbs transport: the region's address and length and its rkey
// on each of the owner's devices (RWIN_IB_HCA order; a peer's QP on the owner's device d uses
// rkeys[d]). Version 2 added the per-device rkeys.
struct KeyBlob {
  static constexpr const char* kWhat = "verbs memory key blob";
  static constexpr uint32_t kMagic = 0x4b4d5752;  // "RWMK" little endian
  static constexpr uint16_t kVersion = 2;
  static constexpr size_t kMaxRails = 4;
  static constexpr size_t kBytes = 8 + 8 + 8 + 4 + 4 * kMaxRails;
  uint64_t addr = 0;   // the owner's virtual address of byte 0 (what RDMA work requests target)
  uint64_t bytes = 0;  // length of the region
  uint32_t rails = 1;  // devices the region is registered on (1 .. kMaxRails)
  std::array<uint32_t, kMaxRails> rkeys{};  // [0, rails) valid, the rest zero

  template <class IO, class Self>
  static void fields(IO& io, Self& s) {
    io.u64(s.addr);
    io.u64(s.bytes);
    io.u32(s.rails);
    for (auto& k : s.rkeys) io.u32(k);
  }
  std::vector<uint8_t> pack() const { return blob_detail::pack(*this); }
  static KeyBlob unpack(std::span<const uint8_t> in) {
    const auto k = blob_detail::unpack<KeyBlob>(in);
    if (k.bytes > UINT64_MAX - k.addr) {
      throw TransportError("verbs memory key blob describes a region that wraps the address space: addr " +
                           std::to_string(k.addr) + ", " + std::to_string(k.bytes) + " bytes");
    }
    if (k.rails < 1 || k.rails > kMaxRails) {
      throw TransportError("verbs memory key blob names " + std::to_string(k.rails) + " devices, expected 1 .. " +
                           std::to_string(kMaxRails));
    }
    return k;
  }
};

}  // namespace rwin::transport::verbs

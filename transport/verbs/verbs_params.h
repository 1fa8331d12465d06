// The verbs set-up constants and the knobs that feed them: one set for the transport
// (transport/verbs/) and bench/raw_verbs.cpp, so the baseline cannot drift from what it measures.
// Free of <infiniband/verbs.h>: the core validates the knobs (Options::from_env) and rwin-info shows
// them in builds without libibverbs too. docs/CONFIG.md documents every knob.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rwin::transport {

namespace verbs_const {
// Send queue slots per peer: deep enough for a pipeline of chunks plus notifies; the CQ holds one
// entry per slot of every peer, so with many ranks the depth shrinks to fit max_cqe.
constexpr uint32_t kMaxSqDepth = 256;
constexpr uint32_t kMinSqDepth = 8;
// Writes up to this size are copied into the WQE (IBV_SEND_INLINE) when the device allows it:
// saves the device a DMA read of the source, and lets a small put complete at post
// (verbs_datapath.cpp). Asked for in this order; the device grants what it can (perftest's
// default is 220 on ConnectX; rxe grants a few hundred bytes).
constexpr uint32_t kWantInline[] = {256, 64, 0};
// RC ack timeout 4.096 us * 2^18 = 1.07 s (NCCL's default), retried 6 times: a dead peer yields
// IBV_WC_RETRY_EXC_ERR after about 7 * 1.07 s. Not shorter: rxe under qemu TCG with 5 ranks on 2
// vCPUs delays acks past 268 ms (2^16), and the retransmissions then moved a QP to error now and
// then (a put(Add) test failed 2-3 in 30 runs with 2^16, 0 in 30 with 2^18). Not 7 retries:
// rdma_rxe treats retry_cnt 7 as "retry forever" (rxe_comp.c decrements only a count != 7), so a
// write to a dead peer on rxe would never complete.
constexpr uint8_t kDefaultAckTimeout = 18;
constexpr uint8_t kDefaultRetryCount = 6;
// 7 = infinite. No receive is ever posted, so a receiver-not-ready NAK cannot happen: no knob.
constexpr uint8_t kRnrRetry = 7;
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint8_t kDefaultHopLimit = 64;
// Outstanding RDMA READ/atomic requests per QP we ask for; capped by both devices (rd_atomic_limits).
constexpr int kWantRdAtomic = 16;
// Striping (RWIN_VERBS_QPS_PER_PEER, RWIN_VERBS_STRIPE_MIN): at most this many RC QPs per peer, and
// by default Writes/Reads of at least 64 KiB go round-robin over them (ROCm mori's stripe size;
// NCCL's net_ib splits a message over NCCL_IB_QPS_PER_CONNECTION QPs the same way).
constexpr int kMaxQpsPerPeer = 16;
constexpr uint32_t kDefaultStripeMin = 64 << 10;
// Devices one transport drives at once (RWIN_IB_HCA); KeyBlob carries an rkey for each.
constexpr int kMaxRails = 4;
}  // namespace verbs_const

// Which GID type to use (RWIN_IB_GID_TYPE). Values are the blob's wire codes (verbs_blob.h).
enum class GidType : uint8_t { Auto = 0, Ib = 1, RoceV1 = 2, RoceV2 = 3 };
const char* gid_type_name(GidType t) noexcept;  // "auto", "ib", "roce-v1", "roce-v2"

// What to do about fork() (RWIN_IB_FORK_SAFE); see docs/CONFIG.md and fork_safety() in verbs_device.h.
enum class ForkSafe : uint8_t { Auto, On, Off };
const char* fork_safe_name(ForkSafe f) noexcept;  // "auto", "1", "0"

// An address prefix a GID must fall in (RWIN_IB_GID_SUBNET, like NCCL_IB_ADDR_RANGE): IPv4
// "10.1.0.0/16" matches IPv4-mapped GIDs (::ffff:10.1.x.y), IPv6 "fd00::/8" any GID bitwise.
struct GidSubnet {
  bool set = false;
  std::array<uint8_t, 16> prefix{};  // as a GID: IPv4 mapped into ::ffff:0:0/96
  int bits = 0;                      // of the 128
  std::string text;                  // as given, for messages
  bool matches(const uint8_t gid[16]) const noexcept;
};
// Throws TransportError naming `name`, the text and the accepted form.
GidSubnet parse_gid_subnet(const char* name, std::string_view text);

// The devices to use (RWIN_IB_HCA, NCCL_IB_HCA's syntax): "mlx5_0:1,mlx5_1:1" lists devices (with
// an optional port) in the order their queue pairs take the lanes; a name matches every device it
// prefixes unless the list starts with '=' (exact names); a list starting with '^' excludes.
struct HcaList {
  struct Entry {
    std::string name;
    int port = 0;  // 0: RWIN_IB_PORT
  };
  bool set = false;
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;
  std::string text;  // as given, for messages
  bool matches(const Entry& e, const std::string& device) const {
    return exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
  }
};
// Throws TransportError naming `name`, the text and the accepted form.
HcaList parse_hca_list(const char* name, std::string_view text);

struct VerbsParams {
  uint8_t traffic_class = 0;  // GRH traffic class: RoCE v2 DSCP << 2 | ECN (RWIN_IB_TC)
  uint8_t service_level = 0;  // IB SL; on RoCE the priority (PCP) (RWIN_IB_SL)
  uint8_t hop_limit = verbs_const::kDefaultHopLimit;  // GRH hop limit / IP TTL (RWIN_IB_HOP_LIMIT)
  GidType gid_type = GidType::Auto;                   // RWIN_IB_GID_TYPE
  GidSubnet gid_subnet;                               // RWIN_IB_GID_SUBNET
  uint8_t ack_timeout = verbs_const::kDefaultAckTimeout;  // 4.096 us * 2^n (RWIN_IB_TIMEOUT)
  uint8_t retry_count = verbs_const::kDefaultRetryCount;  // RWIN_IB_RETRY_CNT
  ForkSafe fork_safe = ForkSafe::Auto;                    // RWIN_IB_FORK_SAFE
  uint8_t qps_per_peer = 1;  // RC QPs to each peer of a collective job (RWIN_VERBS_QPS_PER_PEER)
  uint32_t stripe_min = verbs_const::kDefaultStripeMin;  // Writes/Reads this large are striped (RWIN_VERBS_STRIPE_MIN)
  HcaList hca;  // RWIN_IB_HCA: several devices (rails); unset = RWIN_IB_DEVICE or the first usable one

  // Reads the knobs (common/knobs.h records their source for rwin-info). Throws TransportError
  // naming the variable, its text and the accepted values.
  static VerbsParams from_env();
  // "tc 0 sl 0 hop_limit 64 gid_type auto timeout 18 retry_cnt 6": for logs.
  std::string text() const;
};

// The RDMA READ/atomic depths of one QP. Each side advertises what its device allows (capped at
// kWantRdAtomic): `init` = max_qp_init_rd_atom (requests it may have outstanding as initiator),
// `resp` = max_qp_rd_atom (requests it accepts as responder). Our initiator depth (max_rd_atomic,
// RTS) must not exceed the peer's responder resources, or the peer NAKs the excess as an invalid
// request (a fatal QP error); our responder resources (max_dest_rd_atomic, RTR) are what our device
// grants. perftest exchanges the same numbers (its out_reads).
struct RdAtomic {
  uint8_t max_rd_atomic = 0;       // RTS: initiator depth
  uint8_t max_dest_rd_atomic = 0;  // RTR: responder resources
};
// local_init/local_resp: this device's max_qp_init_rd_atom / max_qp_rd_atom (any int);
// peer_init/peer_resp: what the peer's blob advertises. Caps at kWantRdAtomic. Returns "" and
// fills `out`, or why the pair cannot do RDMA reads and atomics (a zero on either side).
std::string rd_atomic_limits(int local_init, int local_resp, int peer_init, int peer_resp, RdAtomic& out);
// What this device advertises: min(device value, kWantRdAtomic), at least 0.
uint8_t rd_atomic_advertised(int device_value) noexcept;

}  // namespace rwin::transport

// The verbs knobs (verbs_params.h). Built into every librwin, with or without libibverbs, so the
// core and rwin-info validate and show them everywhere.
#include "transport/verbs/verbs_params.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "common/knobs.h"
#include "common/parse_number.h"
#include "transport/transport.h"

namespace rwin::transport {
namespace {

uint8_t int_knob(const char* name, unsigned lo, unsigned hi, uint8_t dflt, const char* what) {
  const char* v = knobs::env(name);
  if (!v) return dflt;
  uint64_t out = 0;
  const std::string why = common::parse_u64_in(v, lo, hi, out);
  if (!why.empty()) {
    throw TransportError(std::string(name) + "='" + v + "' is not an integer in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "] (" + why + "); expected decimal digits only: " + what);
  }
  return static_cast<uint8_t>(out);
}

}  // namespace

const char* gid_type_name(GidType t) noexcept {
  switch (t) {
    case GidType::Auto: return "auto";
    case GidType::Ib: return "ib";
    case GidType::RoceV1: return "roce-v1";
    case GidType::RoceV2: return "roce-v2";
  }
  return "?";
}

const char* fork_safe_name(ForkSafe f) noexcept {
  switch (f) {
    case ForkSafe::Auto: return "auto";
    case ForkSafe::On: return "1";
    case ForkSafe::Off: return "0";
  }
  return "?";
}

bool GidSubnet::matches(const uint8_t gid[16]) const noexcept {
  if (!set) return true;
  for (int i = 0; i < bits; ++i) {
    const uint8_t mask = static_cast<uint8_t>(0x80u >> (i % 8));
    if ((gid[i / 8] & mask) != (prefix[static_cast<size_t>(i / 8)] & mask)) return false;
  }
  return true;
}

GidSubnet parse_gid_subnet(const char* name, std::string_view text) {
  const std::string t(text);
  auto bad = [&](const std::string& why) {
    return TransportError(std::string(name) + "='" + t + "' is not an address prefix (" + why +
                          "); expected IPv4 a.b.c.d/n (n 0..32, matches RoCE v2 IPv4-mapped GIDs) or IPv6 x:x::/n "
                          "(n 0..128), e.g. 10.1.0.0/16 or fe80::/64");
  };
  const size_t slash = t.find('/');
  const std::string addr = t.substr(0, slash);
  GidSubnet s;
  s.set = true;
  s.text = t;
  in_addr v4{};
  in6_addr v6{};
  int max_bits = 0;
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    s.prefix[10] = s.prefix[11] = 0xff;
    std::memcpy(s.prefix.data() + 12, &v4, 4);
    max_bits = 32;
  } else if (inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    std::memcpy(s.prefix.data(), &v6, 16);
    max_bits = 128;
  } else {
    throw bad("'" + addr + "' is neither an IPv4 nor an IPv6 address");
  }
  int bits = max_bits;
  if (slash != std::string::npos) {
    const std::string why = common::parse_int_in(std::string_view(t).substr(slash + 1), 0, max_bits, bits);
    if (!why.empty()) throw bad("prefix length: " + why);
  }
  s.bits = max_bits == 32 ? 96 + bits : bits;
  return s;
}

HcaList parse_hca_list(const char* name, std::string_view text) {
  HcaList h;
  h.set = true;
  h.text = std::string(text);
  auto bad = [&](const std::string& why) {
    return TransportError(std::string(name) + "='" + h.text + "' is not a device list (" + why +
                          "); expected NAME[:PORT][,NAME[:PORT]...] as NCCL_IB_HCA: a leading '=' for exact names, "
                          "'^' to exclude, e.g. mlx5_0:1,mlx5_1:1 or =rxe0 or ^mlx5_2; at most " +
                          std::to_string(verbs_const::kMaxRails) + " devices");
  };
  std::string_view t = text;
  if (!t.empty() && t[0] == '^') h.exclude = true, t.remove_prefix(1);
  if (!t.empty() && t[0] == '=') h.exact = true, t.remove_prefix(1);
  while (true) {
    const size_t comma = t.find(',');
    std::string_view item = t.substr(0, comma);
    HcaList::Entry e;
    const size_t colon = item.find(':');
    e.name = std::string(item.substr(0, colon));
    if (e.name.empty()) throw bad("an empty device name");
    if (colon != std::string_view::npos) {
      const std::string why = common::parse_int_in(item.substr(colon + 1), 1, 255, e.port);
      if (!why.empty()) throw bad("port of " + e.name + ": " + why);
    }
    h.entries.push_back(e);
    if (comma == std::string_view::npos) break;
    t.remove_prefix(comma + 1);
  }
  if (!h.exclude && h.entries.size() > static_cast<size_t>(verbs_const::kMaxRails)) {
    throw bad(std::to_string(h.entries.size()) + " devices");
  }
  return h;
}

VerbsParams VerbsParams::from_env() {
  VerbsParams p;
  p.traffic_class = int_knob("RWIN_IB_TC", 0, 255, 0, "the GRH traffic class (RoCE v2: DSCP << 2 | ECN, e.g. 106)");
  p.service_level = int_knob("RWIN_IB_SL", 0, 15, 0, "the service level (IB SL; RoCE priority)");
  p.hop_limit = int_knob("RWIN_IB_HOP_LIMIT", 1, 255, verbs_const::kDefaultHopLimit, "the GRH hop limit (IP TTL)");
  p.ack_timeout = int_knob("RWIN_IB_TIMEOUT", 1, 31, verbs_const::kDefaultAckTimeout,
                           "the RC ack timeout exponent, 4.096 us * 2^n (0 = wait forever is refused)");
  p.retry_count = int_knob("RWIN_IB_RETRY_CNT", 0, 7, verbs_const::kDefaultRetryCount, "RC retransmissions");
  if (const char* v = knobs::env("RWIN_IB_GID_TYPE")) {
    const std::string_view s(v);
    if (s == "auto") p.gid_type = GidType::Auto;
    else if (s == "roce-v2") p.gid_type = GidType::RoceV2;
    else if (s == "roce-v1") p.gid_type = GidType::RoceV1;
    else if (s == "ib") p.gid_type = GidType::Ib;
    else throw TransportError(std::string("RWIN_IB_GID_TYPE='") + v + "' is not a GID type; expected auto, roce-v2, roce-v1 or ib");
  }
  if (const char* v = knobs::env("RWIN_IB_GID_SUBNET")) p.gid_subnet = parse_gid_subnet("RWIN_IB_GID_SUBNET", v);
  p.qps_per_peer = int_knob("RWIN_VERBS_QPS_PER_PEER", 1, verbs_const::kMaxQpsPerPeer, 1,
                            "RC queue pairs to each peer; large Writes/Reads go round-robin over them");
  if (const char* v = knobs::env("RWIN_VERBS_STRIPE_MIN")) {
    uint64_t out = 0;
    std::string why = common::parse_size(v, out);
    if (why.empty() && (out < 1 || out > (uint64_t{1} << 31))) why = "outside [1, 2 GiB]";
    if (!why.empty()) {
      throw TransportError(std::string("RWIN_VERBS_STRIPE_MIN='") + v + "' is not a size in [1, 2 GiB] (" + why +
                           "); expected " + common::kSizeForm + ": the smallest Write/Read striped over the " +
                           "RWIN_VERBS_QPS_PER_PEER queue pairs of a peer");
    }
    p.stripe_min = static_cast<uint32_t>(out);
  }
  if (const char* v = knobs::env("RWIN_IB_HCA")) p.hca = parse_hca_list("RWIN_IB_HCA", v);
  if (const char* v = knobs::env("RWIN_IB_FORK_SAFE")) {
    const std::string_view s(v);
    if (s == "auto") p.fork_safe = ForkSafe::Auto;
    else if (s == "1") p.fork_safe = ForkSafe::On;
    else if (s == "0") p.fork_safe = ForkSafe::Off;
    else throw TransportError(std::string("RWIN_IB_FORK_SAFE='") + v + "' is not auto, 1 or 0");
  }
  return p;
}

std::string VerbsParams::text() const {
  return "tc " + std::to_string(traffic_class) + " sl " + std::to_string(service_level) + " hop_limit " +
         std::to_string(hop_limit) + " gid_type " + gid_type_name(gid_type) +
         (gid_subnet.set ? " gid_subnet " + gid_subnet.text : std::string()) + " timeout " +
         std::to_string(ack_timeout) + " retry_cnt " + std::to_string(retry_count) + " fork_safe " +
         fork_safe_name(fork_safe) + " qps_per_peer " + std::to_string(qps_per_peer) + " stripe_min " +
         std::to_string(stripe_min) + (hca.set ? " hca " + hca.text : std::string());
}

uint8_t rd_atomic_advertised(int device_value) noexcept {
  return static_cast<uint8_t>(std::clamp(device_value, 0, verbs_const::kWantRdAtomic));
}

std::string rd_atomic_limits(int local_init, int local_resp, int peer_init, int peer_resp, RdAtomic& out) {
  const int li = rd_atomic_advertised(local_init), lr = rd_atomic_advertised(local_resp);
  const int pi = rd_atomic_advertised(peer_init), pr = rd_atomic_advertised(peer_resp);
  // rwin issues RDMA reads and atomics both ways: a zero anywhere means one of them cannot work.
  if (li == 0) return "this device allows no outstanding RDMA read/atomic as initiator (max_qp_init_rd_atom 0)";
  if (lr == 0) return "this device accepts no RDMA read/atomic as responder (max_qp_rd_atom 0)";
  if (pi == 0) return "the peer allows no outstanding RDMA read/atomic as initiator (its max_qp_init_rd_atom 0)";
  if (pr == 0) return "the peer accepts no RDMA read/atomic as responder (its max_qp_rd_atom 0)";
  out.max_rd_atomic = static_cast<uint8_t>(std::min(li, pr));
  out.max_dest_rd_atomic = static_cast<uint8_t>(lr);
  return {};
}

}  // namespace rwin::transport

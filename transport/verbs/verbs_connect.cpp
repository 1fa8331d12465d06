// Construction and connection: a PD and CQ per device (RWIN_IB_HCA), RWIN_VERBS_QPS_PER_PEER RC queue
// pairs per peer and device (self included; lane l on device l mod devices), and the
// INIT -> RTR -> RTS sequence of rdma-core's rc_pingpong. Two ways to meet a peer, one set of
// steps (open_qp: create + INIT; connect_qp: checks + RTR + RTS):
//   connect()       collective, every rank at once: a ConnBlob per QP of a pair, one message per
//                   pair through Bootstrap::send/recv
//   add_peer() ...  run-time peers (TransportConfig::dynamic_peers): an EndpointBlob per peer that
//                   the caller carries (transport.h, "Peers met at run time")
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "bootstrap/bootstrap.h"
#include "common/log.h"
#include "transport/verbs/verbs_blob.h"
#include "transport/verbs/verbs_transport.h"
#include "transport/verbs/verbs_transport_impl.h"

namespace rwin::transport::verbs {
namespace {

// The set-up constants (queue depths, inline size, ack timeout, retries, rd_atomic) live in
// verbs_params.h, shared with bench/raw_verbs.cpp; the knobs (cfg_.verbs) override some of them.
using verbs_const::kMaxSqDepth;
using verbs_const::kMinSqDepth;
using verbs_const::kMinRnrTimer;
using verbs_const::kRnrRetry;
using verbs_const::kWantInline;
// Run-time peers: the CQ starts with room for this many peers' send queues and grows on demand.
constexpr uint32_t kInitialDynamicPeers = 4;

std::atomic<uint64_t> g_connect_generation{0};

uint32_t random_psn() {
  std::random_device rd;
  return rd() & 0xffffff;
}

uint64_t random_instance() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

std::string hex64(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

bool all_zero(const std::array<uint8_t, 16>& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

VerbsTransport::VerbsTransport(const TransportConfig& cfg) : cfg_(cfg) {
  if (!cfg.dynamic_peers && (cfg.nranks < 1 || cfg.rank < 0 || cfg.rank >= cfg.nranks)) {
    throw TransportError("verbs: bad rank " + std::to_string(cfg.rank) + " of " + std::to_string(cfg.nranks));
  }
  for (OpenedDevice& d : open_devices(cfg)) {
    Rail r;
    r.info = d.choice;
    r.dev = std::make_shared<DeviceHandles>();
    r.dev->ctx = std::move(d.ctx);
    rails_.push_back(std::move(r));
  }
  // Run-time peers (agents) use one QP on the first device; the others stay open but idle.
  lanes_ = cfg.dynamic_peers ? 1 : cfg.verbs.qps_per_peer * static_cast<int>(rails_.size());
  std::string devs;
  for (const Rail& r : rails_) {
    devs += (devs.empty() ? "" : " + ") + r.info.name + " port " + std::to_string(r.info.port) + " gid " +
            std::to_string(r.info.gid_index);
  }
  describe_ = "verbs(" + devs + (lanes_ > 1 ? ", " + std::to_string(lanes_) + " qps per peer" : std::string()) + ")";
  if (cfg.dynamic_peers) {
    instance_ = random_instance();
    self_ = "verbs instance " + hex64(instance_);
  } else {
    self_ = "rank " + std::to_string(cfg.rank);
  }
  const std::string who = self_ + ": " + describe_;
  const uint32_t nranks = cfg.dynamic_peers ? 1 : static_cast<uint32_t>(cfg.nranks);
  // QPs on each rail's CQ: lanes_ / rails per rank (run-time peers: one, on rail 0).
  const uint32_t per_rail = nranks * static_cast<uint32_t>(cfg.dynamic_peers ? 1 : cfg.verbs.qps_per_peer);
  sq_depth_ = kMaxSqDepth;
  max_msg_ = UINT64_MAX;
  for (Rail& r : rails_) {
    RWIN_LOG(Debug, Verbs, "%s: %s gid %s (%s); %s; fork safety %s", who.c_str(), r.info.name.c_str(),
             gid_text(r.info.gid).c_str(), r.info.gid_kind.c_str(), cfg.verbs.text().c_str(), fork_status_text());
    r.dev->pd.reset(ibv_alloc_pd(r.dev->ctx.get()));
    if (!r.dev->pd) throw TransportError(who + ": " + r.info.name + ": ibv_alloc_pd failed: " + std::strerror(errno));
    devices_.push_back(r.dev);
    const auto& da = r.info.dev_attr;
    sq_depth_ = std::min<uint32_t>(sq_depth_, static_cast<uint32_t>(da.max_qp_wr));
    sq_depth_ = std::min<uint32_t>(sq_depth_, static_cast<uint32_t>(da.max_cqe) / per_rail);
    if (sq_depth_ < kMinSqDepth) {
      throw TransportError(who + ": " + std::to_string(nranks) + " ranks x " + std::to_string(lanes_) +
                           " queue pairs per peer need a completion queue of " + std::to_string(per_rail * kMinSqDepth) +
                           " entries on " + r.info.name + ", its max_cqe is " + std::to_string(da.max_cqe) +
                           (lanes_ > 1 ? " (lower RWIN_VERBS_QPS_PER_PEER)" : ""));
    }
    max_msg_ = std::min<uint64_t>(max_msg_, r.info.port_attr.max_msg_sz);
  }
  // One CQ entry per send-queue slot of every QP on the rail: every WC (signaled success, error, or
  // flush after an error) belongs to one outstanding WR, and outstanding WRs never exceed the slots.
  for (size_t i = 0; i < rails_.size(); ++i) {
    Rail& r = rails_[i];
    const auto& da = r.info.dev_attr;
    const uint32_t slots =
        cfg.dynamic_peers ? (i == 0 ? std::clamp<uint32_t>(static_cast<uint32_t>(da.max_cqe) / sq_depth_, 1,
                                                           kInitialDynamicPeers)
                                    : 1)
                          : per_rail;
    const int cqe = static_cast<int>(sq_depth_ * slots);
    r.cq.reset(ibv_create_cq(r.dev->ctx.get(), cqe, nullptr, nullptr, 0));
    if (!r.cq) {
      throw TransportError(who + ": " + r.info.name + ": ibv_create_cq of " + std::to_string(cqe) +
                           " entries failed: " + std::strerror(errno));
    }
    r.cq_cqe = std::max(cqe, r.cq->cqe);
  }
  if (!cfg.dynamic_peers) {
    peers_.resize(nranks);
    for (Peer& pr : peers_) pr.lanes.resize(static_cast<size_t>(lanes_));
    live_qps_ = nranks * static_cast<size_t>(lanes_);
  }
  scratch_ = std::make_unique<VerbsMemoryRegion>(devices_, 8, who);
  ensure_result_slots(peers_.size());
}

void VerbsTransport::ensure_result_slots(size_t peers) {
  while (result_pages_.size() * kSlotsPerPage < peers) {
    result_pages_.push_back(std::make_unique<VerbsMemoryRegion>(devices_, kSlotsPerPage * 8, self_ + ": " + describe_));
  }
}

uint64_t* VerbsTransport::result_slot(int peer, uint32_t& lkey) const {
  const auto& page = result_pages_[static_cast<size_t>(peer) / kSlotsPerPage];
  lkey = page->lkey();
  return static_cast<uint64_t*>(page->addr()) + static_cast<size_t>(peer) % kSlotsPerPage;
}

std::string VerbsTransport::who(int peer) const {
  return self_ + " -> peer " + std::to_string(peer) + ": " + describe_;
}

void VerbsTransport::ensure_cq_room(size_t live) {
  const size_t need = static_cast<size_t>(sq_depth_) * (live + retired_undrained_);  // QPs
  Rail& r0 = rails_[0];  // run-time peers live on rail 0
  if (need <= static_cast<size_t>(r0.cq_cqe)) return;
  const int max_cqe = r0.info.dev_attr.max_cqe;
  if (need > static_cast<size_t>(max_cqe)) {
    throw TransportError(self_ + ": " + describe_ + ": " + std::to_string(live) + " live peers (plus " +
                         std::to_string(retired_undrained_) + " failed ones not yet drained by poll()) need a " +
                         "completion queue of " + std::to_string(need) + " entries (" + std::to_string(sq_depth_) +
                         " per peer), device max_cqe is " + std::to_string(max_cqe) + ": end peers with fail_peer()");
  }
  // Doubling: a burst of add_peer() calls resizes a few times, not once per peer.
  const int want = static_cast<int>(std::min<size_t>(std::max<size_t>(need, 2 * static_cast<size_t>(r0.cq_cqe)),
                                                     static_cast<size_t>(max_cqe)));
  // Entries already in the CQ survive a resize (ibv_resize_cq(3)), so work in flight is not lost.
  if (int rc = ibv_resize_cq(r0.cq.get(), want)) {
    throw TransportError(self_ + ": " + describe_ + ": ibv_resize_cq from " + std::to_string(r0.cq_cqe) + " to " +
                         std::to_string(want) + " entries failed: " + std::strerror(rc > 0 ? rc : errno));
  }
  r0.cq_cqe = std::max(want, r0.cq->cqe);
  RWIN_LOG(Debug, Verbs, "%s: %s: completion queue resized to %d entries for %zu live peers", self_.c_str(),
           describe_.c_str(), r0.cq_cqe, live);
}

VerbsTransport::~VerbsTransport() = default;

Capabilities VerbsTransport::capabilities() const {
  Capabilities c;
  c.max_message_bytes = max_msg_;
  // On soft-RoCE, many mid-sized WRITEs in flight beat a few large ones by 2-3x (the requester keeps
  // sending while earlier messages are acknowledged): bench/RESULTS.md, "chunk sweep on rxe".
  c.default_chunk_bytes = 128 << 10;
  c.default_pipeline_depth = 32;
  // IBA spec vol. 1, 9.5 "Transaction ordering" and 9.7.8: on an RC QP the responder executes
  // requests strictly in PSN order, and an RDMA WRITE is executed (data placed) as it arrives. An
  // ATOMIC posted after WRITEs on the same QP therefore executes after them at the target, and a
  // peer that sees the atomic's result sees the written data. The IB fence (IBV_SEND_FENCE) exists
  // for the other direction only: it holds a request until earlier RDMA READ/ATOMIC *responses*
  // are back, because the requester may issue later requests before reads return. Writes then an
  // atomic never need it.
  c.write_then_atomic_ordered = true;
  c.needs_target_progress = false;  // one-sided: the responder HCA executes everything
  c.local_needs_registration = true;  // a Write's source / Read's destination needs an lkey
  c.native_set = false;             // IB has no atomic swap: Swap is a CAS loop (verbs_datapath.cpp)
  c.cpu_atomics = false;            // NIC atomics (IBV_ATOMIC_HCA); nothing is mapped, every atomic is a WR
  return c;
}

QpPtr VerbsTransport::create_qp(int peer, size_t rail) {
  const Rail& r = rails_[rail];
  ibv_qp_init_attr a{};
  a.send_cq = r.cq.get();
  a.recv_cq = r.cq.get();
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;  // selective signalling: post() marks only the last WR of each chain
  a.cap.max_send_wr = sq_depth_;
  a.cap.max_recv_wr = 1;  // no receives are ever posted; some providers reject 0
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  QpPtr qp;
  for (uint32_t want : kWantInline) {  // a provider refuses more inline than it has: ask for less
    a.cap.max_inline_data = want;
    qp.reset(ibv_create_qp(r.dev->pd.get(), &a));
    if (qp) break;
  }
  if (!qp) {
    throw TransportError(who(peer) + ": " + r.info.name + ": ibv_create_qp (rc, " + std::to_string(sq_depth_) +
                         " send slots) failed: " + std::strerror(errno));
  }
  max_inline_ = have_qp_ ? std::min(max_inline_, a.cap.max_inline_data) : a.cap.max_inline_data;
  have_qp_ = true;
  return qp;
}

void VerbsTransport::qp_to_init(ibv_qp* qp, int peer, size_t rail) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(rails_[rail].info.port);
  attr.qp_access_flags =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    throw TransportError(who(peer) + ": ibv_modify_qp to init failed: " + std::strerror(rc));
  }
}

void VerbsTransport::qp_to_rtr_rts(ibv_qp* qp, int peer, size_t rail, uint32_t local_psn, const QpAddress& remote) {
  const DeviceChoice& info = rails_[rail].info;
  const auto& da = info.dev_attr;
  const std::string who = this->who(peer) + ": qp 0x" + [&] {
        char b[16];
        std::snprintf(b, sizeof b, "%x", qp->qp_num);
        return std::string(b);
      }();
  // Checked by connect_qp() already; computed again here from the same inputs.
  RdAtomic rd;
  (void)rd_atomic_limits(da.max_qp_init_rd_atom, da.max_qp_rd_atom, remote.rd_atomic_init, remote.rd_atomic_resp, rd);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  // Both ends must use the same path MTU; the smaller active MTU is the one both ports carry.
  attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(info.port_attr.active_mtu, remote.mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = rd.max_dest_rd_atomic;
  attr.min_rnr_timer = kMinRnrTimer;
  fill_path(attr.ah_attr, info, cfg_.verbs, remote.gid.data(), remote.lid);
  if (int rc = ibv_modify_qp(qp, &attr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    throw TransportError(who + ": ibv_modify_qp to rtr (remote qpn " + std::to_string(remote.qpn) + ", gid " +
                         [&] {
                           ibv_gid g;
                           std::memcpy(g.raw, remote.gid.data(), 16);
                           return gid_text(g);
                         }() +
                         ", lid " + std::to_string(remote.lid) + ") failed: " + std::strerror(rc));
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = cfg_.verbs.ack_timeout;
  attr.retry_cnt = cfg_.verbs.retry_count;
  attr.rnr_retry = kRnrRetry;
  attr.sq_psn = local_psn;
  attr.max_rd_atomic = rd.max_rd_atomic;
  if (int rc = ibv_modify_qp(qp, &attr,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC)) {
    throw TransportError(who + ": ibv_modify_qp to rts failed: " + std::strerror(rc));
  }
}

void VerbsTransport::connect(bootstrap::Bootstrap& bs) {
  const int me = cfg_.rank;
  const std::string whoami = self_ + ": " + describe_;
  if (cfg_.dynamic_peers) {
    throw TransportError(whoami + ": connect(): this transport was made for run-time peers (add_peer/connect_peer)");
  }
  if (connected_) throw TransportError(whoami + ": connect() called twice");
  if (bs.rank() != me || bs.nranks() != cfg_.nranks) {
    throw TransportError(whoami + ": bootstrap is rank " + std::to_string(bs.rank()) + " of " +
                         std::to_string(bs.nranks()) + ", transport was made for rank " + std::to_string(me) + " of " +
                         std::to_string(cfg_.nranks));
  }
  const int n = cfg_.nranks;
  const auto lane_count = static_cast<size_t>(lanes_);
  // mine[p * lanes + l]: lane l's QP toward peer p.
  std::vector<ConnBlob> mine(static_cast<size_t>(n) * lane_count);
  for (int p = 0; p < n; ++p) {
    for (int l = 0; l < lanes_; ++l) {
      ConnBlob& b = mine[static_cast<size_t>(p) * lane_count + static_cast<size_t>(l)];
      static_cast<QpAddress&>(b) = open_qp(p, l);
      b.rank = static_cast<uint32_t>(me);
      b.peer = static_cast<uint32_t>(p);
    }
  }
  // Every rank connects its transports in the same order, so the generation matches across ranks
  // and the tag is unique per exchange as Bootstrap::send/recv require. One message per peer: its
  // lanes' blobs back to back (the count is checked against each blob's own `lanes`).
  const std::string tag = "rwin.verbs.qp." + std::to_string(g_connect_generation.fetch_add(1));
  // Send everything first, then receive: no rank waits for a peer that is itself waiting.
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    std::vector<uint8_t> msg;
    msg.reserve(lane_count * ConnBlob::kBytes);
    for (size_t l = 0; l < lane_count; ++l) {
      const auto b = mine[static_cast<size_t>(p) * lane_count + l].pack();
      msg.insert(msg.end(), b.begin(), b.end());
    }
    bs.send(p, tag, msg);
  }
  for (int p = 0; p < n; ++p) {
    std::vector<ConnBlob> remote(lane_count);
    if (p == me) {
      // Loopback: each QP is connected to itself (dest qpn = own qpn, its own GID). rxe and
      // hardware HCAs loop such packets back internally; no second QP is needed.
      for (size_t l = 0; l < lane_count; ++l) remote[l] = mine[static_cast<size_t>(p) * lane_count + l];
    } else {
      const auto bytes = bs.recv(p, tag);
      const std::string from = whoami + ": from peer " + std::to_string(p) + ": ";
      // A peer with another RWIN_VERBS_QPS_PER_PEER sends another number of blobs: read the
      // first one's count so the message names both settings.
      if (bytes.size() != lane_count * ConnBlob::kBytes) {
        uint32_t theirs = 0;
        if (bytes.size() >= ConnBlob::kBytes && bytes.size() % ConnBlob::kBytes == 0) {
          try {
            theirs = ConnBlob::unpack(std::span<const uint8_t>(bytes.data(), ConnBlob::kBytes)).lanes;
          } catch (const TransportError&) {
          }
        }
        throw TransportError(from + std::to_string(bytes.size()) + " bytes of connection blobs, expected " +
                             std::to_string(lane_count) + " x " + std::to_string(ConnBlob::kBytes) +
                             (theirs ? " (the peer has " + std::to_string(theirs) + " queue pairs per peer, this rank " +
                                           std::to_string(lanes_) + ": set RWIN_VERBS_QPS_PER_PEER alike on every rank)"
                                     : std::string()));
      }
      for (size_t l = 0; l < lane_count; ++l) {
        try {
          remote[l] = ConnBlob::unpack(std::span<const uint8_t>(bytes.data() + l * ConnBlob::kBytes, ConnBlob::kBytes));
        } catch (const TransportError& e) {
          throw TransportError(from + e.what());
        }
        if (remote[l].rank != static_cast<uint32_t>(p) || remote[l].peer != static_cast<uint32_t>(me)) {
          throw TransportError(whoami + ": connection blob from peer " + std::to_string(p) + " says it is from rank " +
                               std::to_string(remote[l].rank) + " for rank " + std::to_string(remote[l].peer));
        }
      }
    }
    for (int l = 0; l < lanes_; ++l) connect_qp(p, l, remote[static_cast<size_t>(l)], "peer " + std::to_string(p));
  }
  // No rank posts before every QP of every rank is at least RTR: a request reaching a QP still in
  // INIT is dropped and only recovered by the retry timer.
  bs.barrier();
  connected_ = true;
  for (Peer& pr : peers_) pr.connected = true;
}

QpAddress VerbsTransport::open_qp(int peer, int lane) {
  Lane& ln = peers_[peer].lanes[static_cast<size_t>(lane)];
  const size_t rail = rail_of(lane);
  const DeviceChoice& info = rails_[rail].info;
  ln.rail = static_cast<uint8_t>(rail);
  ln.qp = create_qp(peer, rail);
  qp_to_init(ln.qp.get(), peer, rail);
  QpAddress& a = ln.local;
  a.qpn = ln.qp->qp_num;
  a.psn = random_psn();
  a.lid = info.port_attr.lid;
  a.mtu = static_cast<uint8_t>(info.port_attr.active_mtu);
  a.link_layer = info.port_attr.link_layer;
  std::memcpy(a.gid.data(), info.gid.raw, 16);
  a.gid_type = static_cast<uint8_t>(info.gid_type);
  a.rd_atomic_init = rd_atomic_advertised(info.dev_attr.max_qp_init_rd_atom);
  a.rd_atomic_resp = rd_atomic_advertised(info.dev_attr.max_qp_rd_atom);
  a.flush_addr = reinterpret_cast<uint64_t>(scratch_->addr());
  a.flush_rkey = scratch_->rkey(rail);
  a.lane = static_cast<uint8_t>(lane);
  a.lanes = static_cast<uint16_t>(peers_[peer].lanes.size());
  a.rail = static_cast<uint8_t>(rail);
  return a;
}

void VerbsTransport::connect_qp(int peer, int lane, const QpAddress& remote, const std::string& from) {
  // Checked before any ibv_modify_qp: a rejected blob leaves the QP in INIT, so the caller may
  // retry with a correct one.
  Lane& ln = peers_[peer].lanes[static_cast<size_t>(lane)];
  const DeviceChoice& info = rails_[ln.rail].info;
  if (remote.rail >= KeyBlob::kMaxRails) {
    throw TransportError(who(peer) + ": " + from + " puts its queue pair on device " + std::to_string(remote.rail) +
                         ", expected 0 .. " + std::to_string(KeyBlob::kMaxRails - 1));
  }
  if (remote.lanes != ln.local.lanes || remote.lane != lane) {
    throw TransportError(who(peer) + ": " + from + " sent the blob of its queue pair " + std::to_string(remote.lane) +
                         " of " + std::to_string(remote.lanes) + " for this side's queue pair " + std::to_string(lane) +
                         " of " + std::to_string(ln.local.lanes) +
                         (remote.lanes != ln.local.lanes
                              ? " (RWIN_VERBS_QPS_PER_PEER x the number of RWIN_IB_HCA devices differs between "
                                "the two: make it alike on every rank; run-time peers always use one)"
                              : std::string()));
  }
  if (remote.link_layer != info.port_attr.link_layer) {
    throw TransportError(who(peer) + ": " + from + " is on link layer " + std::to_string(remote.link_layer) +
                         ", this port on " + std::to_string(info.port_attr.link_layer) + " (1 = ib, 2 = ethernet)");
  }
  if (remote.mtu < IBV_MTU_256 || remote.mtu > IBV_MTU_4096) {
    throw TransportError(who(peer) + ": " + from + " has MTU code " + std::to_string(remote.mtu) +
                         ", expected 1 (256 bytes) .. 5 (4096 bytes), enum ibv_mtu");
  }
  if ((info.roce || remote.lid == 0) && all_zero(remote.gid)) {
    throw TransportError(who(peer) + ": " + from + " has an all-zero GID and " +
                         (info.roce ? "RoCE addresses every packet by GID" : "no LID either"));
  }
  // Both ends must speak the same GID type: a RoCE v2 packet (UDP/IP) never reaches a RoCE v1 GID
  // (raw Ethernet), and the QP would only time out. 0 = a kernel that does not report types.
  const auto mine = info.gid_type;
  if (remote.gid_type > static_cast<uint8_t>(GidType::RoceV2)) {
    throw TransportError(who(peer) + ": " + from + " has GID type code " + std::to_string(remote.gid_type) +
                         ", expected 0 (unknown) .. 3 (roce-v2)");
  }
  const auto theirs = static_cast<GidType>(remote.gid_type);
  if (mine != GidType::Auto && theirs != GidType::Auto && mine != theirs) {
    ibv_gid g;
    std::memcpy(g.raw, remote.gid.data(), 16);
    throw TransportError(who(peer) + ": " + from + " uses a " + gid_type_name(theirs) + " GID (" + gid_text(g) +
                         "), this side a " + gid_type_name(mine) + " GID (index " + std::to_string(info.gid_index) +
                         ", " + gid_text(info.gid) + "): both ends need the same type; set RWIN_IB_GID_TYPE or "
                         "RWIN_GID_INDEX alike on every rank");
  }
  RdAtomic rd;
  const auto& da = info.dev_attr;
  if (std::string why = rd_atomic_limits(da.max_qp_init_rd_atom, da.max_qp_rd_atom, remote.rd_atomic_init,
                                         remote.rd_atomic_resp, rd);
      !why.empty()) {
    throw TransportError(who(peer) + ": " + from + ": " + why + " (rwin needs RDMA reads and atomics)");
  }
  ln.flush_addr = remote.flush_addr;
  ln.flush_rkey = remote.flush_rkey;
  ln.remote_rail = remote.rail;
  qp_to_rtr_rts(ln.qp.get(), peer, ln.rail, ln.local.psn, remote);
  if (log::enabled(log::Level::Debug, log::Subsys::Verbs)) {
    // What the device took, read back (ibv_query_qp): the knobs' values as the QP holds them.
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    const bool got = ibv_query_qp(ln.qp.get(), &q, IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                                       IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &qi) == 0;
    RWIN_LOG(Debug, Verbs,
             "%s: qp 0x%x connected to %s, remote qp 0x%x (RTR, RTS): %s tc %u sl %u hop_limit %u timeout %u "
             "retry_cnt %u max_rd_atomic %u max_dest_rd_atomic %u",
             who(peer).c_str(), ln.qp->qp_num, from.c_str(), remote.qpn, got ? "queried" : "set",
             unsigned{got ? q.ah_attr.grh.traffic_class : cfg_.verbs.traffic_class},
             unsigned{got ? q.ah_attr.sl : cfg_.verbs.service_level},
             unsigned{got ? q.ah_attr.grh.hop_limit : cfg_.verbs.hop_limit},
             unsigned{got ? q.timeout : cfg_.verbs.ack_timeout}, unsigned{got ? q.retry_cnt : cfg_.verbs.retry_count},
             unsigned{got ? q.max_rd_atomic : rd.max_rd_atomic},
             unsigned{got ? q.max_dest_rd_atomic : rd.max_dest_rd_atomic});
  }
}

int VerbsTransport::add_peer() {
  if (!cfg_.dynamic_peers) {
    throw TransportError(self_ + ": " + describe_ + ": add_peer(): this transport was made for the collective " +
                         "connect() (TransportConfig::dynamic_peers is false)");
  }
  const int p = npeers();
  ensure_cq_room(live_qps_ + 1);
  ensure_result_slots(static_cast<size_t>(p) + 1);
  peers_.emplace_back();
  peers_.back().lanes.resize(1);
  try {
    open_qp(p, 0);
  } catch (...) {
    peers_.pop_back();  // the index was never handed out
    throw;
  }
  ++live_qps_;
  return p;
}

// The checks local_endpoint() and connect_peer() share: a run-time transport, a known slot that
// has not failed. `call` names the call in the message.
namespace {
void check_slot(bool dynamic, int peer, int npeers, const std::string& self, const std::string& error,
                const char* call) {
  if (!dynamic) {
    throw TransportError(self + ": " + call + "(" + std::to_string(peer) +
                         "): this transport was made for the collective connect() (no run-time peers)");
  }
  if (peer < 0 || peer >= npeers) {
    throw TransportError(self + ": " + call + "(" + std::to_string(peer) + "): no such peer (" +
                         std::to_string(npeers) + " added with add_peer())");
  }
  if (!error.empty()) {
    throw TransportError(self + ": " + call + "(" + std::to_string(peer) + "): the peer has failed: " + error);
  }
}
}  // namespace

std::vector<uint8_t> VerbsTransport::local_endpoint(int peer) {
  check_slot(cfg_.dynamic_peers, peer, npeers(), self_ + ": " + describe_,
             peer >= 0 && peer < npeers() ? peers_[peer].error : std::string(), "local_endpoint");
  EndpointBlob b;
  static_cast<QpAddress&>(b) = peers_[peer].lanes[0].local;
  b.instance = instance_;
  b.slot = static_cast<uint32_t>(peer);
  return b.pack();
}

void VerbsTransport::connect_peer(int peer, std::span<const uint8_t> remote_endpoint) {
  check_slot(cfg_.dynamic_peers, peer, npeers(), self_ + ": " + describe_,
             peer >= 0 && peer < npeers() ? peers_[peer].error : std::string(), "connect_peer");
  Peer& pr = peers_[peer];
  if (pr.connected) throw TransportError(who(peer) + ": connect_peer(): already connected");
  EndpointBlob remote;
  try {
    remote = EndpointBlob::unpack(remote_endpoint);
  } catch (const TransportError& e) {
    throw TransportError(who(peer) + ": connect_peer(): " + e.what());
  }
  connect_qp(peer, 0, remote,
             "endpoint of " + (remote.instance == instance_ ? std::string("this transport") : "instance " + hex64(remote.instance)) +
                 " slot " + std::to_string(remote.slot));
  pr.connected = true;
}

}  // namespace rwin::transport::verbs

namespace rwin::transport {

std::unique_ptr<Transport> make_verbs_transport(const TransportConfig& cfg) {
  return std::make_unique<verbs::VerbsTransport>(cfg);
}

}  // namespace rwin::transport

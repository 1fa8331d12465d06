// Construction and connection: PD, CQ, one RC queue pair per peer (self included), and the
// INIT -> RTR -> RTS sequence of rdma-core's rc_pingpong, fed by a versioned ConnBlob exchanged
// through Bootstrap::send/recv.
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

// Send queue slots per peer. Deep enough for a pipeline of chunks plus notifies; the CQ must hold
// one entry per slot of every peer, so with many ranks the depth shrinks to fit max_cqe.
constexpr uint32_t kMaxSqDepth = 256;
constexpr uint32_t kMinSqDepth = 8;
// Writes up to this size are copied into the WQE (IBV_SEND_INLINE) when the device allows it:
// saves the device a DMA read of the source for notify-sized payloads.
constexpr uint32_t kWantInline = 64;
// RC ack timeout 4.096 us * 2^18 = 1.07 s (NCCL's default), retried 6 times: a peer whose process died (its QP is
// gone, packets to it are dropped) yields IBV_WC_RETRY_EXC_ERR after about 7 * 1.07 s ~= 7.5 s
// (the core learns of a dead peer through its bootstrap lease within milliseconds anyway).
// Not shorter: rxe under qemu TCG with 5 ranks on 2 vCPUs delays acks past 268 ms (2^16), and
// the retransmitted requests then moved a QP to error now and then (a put(Add) test over verbs
// failed 2-3 in 30 runs with "Work Request Flushed" as the first error; 0 in 30 with 2^18).
// Not 7: rdma_rxe treats retry_cnt 7 as "retry forever" (rxe_comp.c only decrements a count
// != 7, like rnr_retry), so with 7 a write to a dead peer on rxe never completes (seen in the
// guest: no completion after 60 s).
constexpr uint8_t kAckTimeout = 18;
constexpr uint8_t kRetryCount = 6;
constexpr uint8_t kRnrRetry = 7;  // 7 = infinite; we never post receives, so RNR cannot happen
constexpr uint8_t kMinRnrTimer = 12;
// Outstanding RDMA READ/atomic requests per QP, capped by the device (max_qp_rd_atom etc.).
constexpr int kWantRdAtomic = 16;

std::atomic<uint64_t> g_connect_generation{0};

uint32_t random_psn() {
  std::random_device rd;
  return rd() & 0xffffff;
}

}  // namespace

VerbsTransport::VerbsTransport(const TransportConfig& cfg) : cfg_(cfg) {
  if (cfg.nranks < 1 || cfg.rank < 0 || cfg.rank >= cfg.nranks) {
    throw TransportError("verbs: bad rank " + std::to_string(cfg.rank) + " of " + std::to_string(cfg.nranks));
  }
  dev_ = std::make_shared<DeviceHandles>();
  dev_->ctx = open_device(cfg, dev_info_);
  describe_ = "verbs(" + dev_info_.name + " port " + std::to_string(dev_info_.port) + " gid " +
              std::to_string(dev_info_.gid_index) + ")";
  const std::string who = "rank " + std::to_string(cfg.rank) + ": " + describe_;
  dev_->pd.reset(ibv_alloc_pd(dev_->ctx.get()));
  if (!dev_->pd) throw TransportError(who + ": ibv_alloc_pd failed: " + std::strerror(errno));

  const auto& da = dev_info_.dev_attr;
  const uint32_t n = static_cast<uint32_t>(cfg.nranks);
  sq_depth_ = std::min<uint32_t>(kMaxSqDepth, static_cast<uint32_t>(da.max_qp_wr));
  sq_depth_ = std::min<uint32_t>(sq_depth_, static_cast<uint32_t>(da.max_cqe) / n);
  if (sq_depth_ < kMinSqDepth) {
    throw TransportError(who + ": " + std::to_string(n) + " ranks need a completion queue of " +
                         std::to_string(n * kMinSqDepth) + " entries, device max_cqe is " + std::to_string(da.max_cqe));
  }
  // One CQ entry per send-queue slot of every peer: every WC (signaled success, error, or flush
  // after an error) belongs to one outstanding WR, and outstanding WRs never exceed the slots.
  const int cqe = static_cast<int>(sq_depth_ * n);
  cq_.reset(ibv_create_cq(dev_->ctx.get(), cqe, nullptr, nullptr, 0));
  if (!cq_) {
    throw TransportError(who + ": ibv_create_cq of " + std::to_string(cqe) +
                         " entries failed: " + std::strerror(errno));
  }
  peers_.resize(n);
  scratch_ = std::make_unique<VerbsMemoryRegion>(dev_, 8, who);
}

VerbsTransport::~VerbsTransport() = default;

Capabilities VerbsTransport::capabilities() const {
  Capabilities c;
  c.max_message_bytes = dev_info_.port_attr.max_msg_sz;
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
  return c;
}

QpPtr VerbsTransport::create_qp(int peer) {
  ibv_qp_init_attr a{};
  a.send_cq = cq_.get();
  a.recv_cq = cq_.get();
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;  // selective signalling: post() marks only the last WR of each chain
  a.cap.max_send_wr = sq_depth_;
  a.cap.max_recv_wr = 1;  // no receives are ever posted; some providers reject 0
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = kWantInline;
  QpPtr qp(ibv_create_qp(dev_->pd.get(), &a));
  if (!qp) {  // a provider without inline support: fall back to DMA for every write
    a.cap.max_inline_data = 0;
    qp.reset(ibv_create_qp(dev_->pd.get(), &a));
  }
  if (!qp) {
    throw TransportError("rank " + std::to_string(cfg_.rank) + " -> peer " + std::to_string(peer) + ": " + describe_ +
                         ": ibv_create_qp (rc, " + std::to_string(sq_depth_) +
                         " send slots) failed: " + std::strerror(errno));
  }
  max_inline_ = (peer == 0) ? a.cap.max_inline_data : std::min(max_inline_, a.cap.max_inline_data);
  return qp;
}

void VerbsTransport::qp_to_init(ibv_qp* qp, int peer) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(dev_info_.port);
  attr.qp_access_flags =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    throw TransportError("rank " + std::to_string(cfg_.rank) + " -> peer " + std::to_string(peer) + ": " + describe_ +
                         ": ibv_modify_qp to init failed: " + std::strerror(rc));
  }
}

void VerbsTransport::qp_to_rtr_rts(ibv_qp* qp, int peer, uint32_t local_psn, const ConnBlob& remote) {
  const auto& da = dev_info_.dev_attr;
  const std::string who =
      "rank " + std::to_string(cfg_.rank) + " -> peer " + std::to_string(peer) + ": " + describe_ + ": qp 0x" + [&] {
        char b[16];
        std::snprintf(b, sizeof b, "%x", qp->qp_num);
        return std::string(b);
      }();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  // Both ends must use the same path MTU; the smaller active MTU is the one both ports carry.
  attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(dev_info_.port_attr.active_mtu, remote.mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = static_cast<uint8_t>(std::min(kWantRdAtomic, da.max_qp_rd_atom));
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.sl = 0;
  attr.ah_attr.src_path_bits = 0;
  attr.ah_attr.port_num = static_cast<uint8_t>(dev_info_.port);
  // RoCE has no LIDs: every packet carries a GRH, addressed by GID, sent from our chosen GID
  // (for RoCE v2 the GID index also selects the UDP/IP encapsulation). On IB a GRH is needed only
  // across subnets, i.e. when the peer has no LID we can route to.
  if (dev_info_.roce || remote.lid == 0) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(dev_info_.gid_index);
    attr.ah_attr.grh.hop_limit = 64;
    attr.ah_attr.grh.traffic_class = 0;
    attr.ah_attr.grh.flow_label = 0;
  }
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
  attr.timeout = kAckTimeout;
  attr.retry_cnt = kRetryCount;
  attr.rnr_retry = kRnrRetry;
  attr.sq_psn = local_psn;
  attr.max_rd_atomic = static_cast<uint8_t>(std::min(kWantRdAtomic, da.max_qp_init_rd_atom));
  if (int rc = ibv_modify_qp(qp, &attr,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC)) {
    throw TransportError(who + ": ibv_modify_qp to rts failed: " + std::strerror(rc));
  }
}

void VerbsTransport::connect(bootstrap::Bootstrap& bs) {
  const int me = cfg_.rank;
  const std::string who = "rank " + std::to_string(me) + ": " + describe_;
  if (connected_) throw TransportError(who + ": connect() called twice");
  if (bs.rank() != me || bs.nranks() != cfg_.nranks) {
    throw TransportError(who + ": bootstrap is rank " + std::to_string(bs.rank()) + " of " +
                         std::to_string(bs.nranks()) + ", transport was made for rank " + std::to_string(me) + " of " +
                         std::to_string(cfg_.nranks));
  }
  const int n = cfg_.nranks;
  std::vector<ConnBlob> mine(n);
  for (int p = 0; p < n; ++p) {
    peers_[p].qp = create_qp(p);
    qp_to_init(peers_[p].qp.get(), p);
    ConnBlob& b = mine[p];
    b.rank = static_cast<uint32_t>(me);
    b.peer = static_cast<uint32_t>(p);
    b.qpn = peers_[p].qp->qp_num;
    b.psn = random_psn();
    b.lid = dev_info_.port_attr.lid;
    b.mtu = static_cast<uint8_t>(dev_info_.port_attr.active_mtu);
    b.link_layer = dev_info_.port_attr.link_layer;
    std::memcpy(b.gid.data(), dev_info_.gid.raw, 16);
  }
  // Every rank connects its transports in the same order, so the generation matches across ranks
  // and the tag is unique per exchange as Bootstrap::send/recv require.
  const std::string tag = "rwin.verbs.qp." + std::to_string(g_connect_generation.fetch_add(1));
  // Send everything first, then receive: no rank waits for a peer that is itself waiting.
  for (int p = 0; p < n; ++p) {
    if (p != me) bs.send(p, tag, mine[p].pack());
  }
  for (int p = 0; p < n; ++p) {
    ConnBlob remote;
    if (p == me) {
      // Loopback: the QP is connected to itself (dest qpn = own qpn, its own GID). rxe and
      // hardware HCAs loop such packets back internally; no second QP is needed.
      remote = mine[p];
    } else {
      const auto bytes = bs.recv(p, tag);
      try {
        remote = ConnBlob::unpack(bytes);
      } catch (const TransportError& e) {
        throw TransportError(who + ": from peer " + std::to_string(p) + ": " + e.what());
      }
      if (remote.rank != static_cast<uint32_t>(p) || remote.peer != static_cast<uint32_t>(me)) {
        throw TransportError(who + ": connection blob from peer " + std::to_string(p) + " says it is from rank " +
                             std::to_string(remote.rank) + " for rank " + std::to_string(remote.peer));
      }
      if (remote.link_layer != dev_info_.port_attr.link_layer) {
        throw TransportError(who + ": peer " + std::to_string(p) + " is on link layer " +
                             std::to_string(remote.link_layer) + ", this port on " +
                             std::to_string(dev_info_.port_attr.link_layer) + " (1 = ib, 2 = ethernet)");
      }
    }
    qp_to_rtr_rts(peers_[p].qp.get(), p, mine[p].psn, remote);
    RWIN_LOG(Debug, Verbs, "%s: rank %d -> peer %d: qp 0x%x connected to remote qp 0x%x (RTR, RTS)", describe_.c_str(), me, p,
             peers_[p].qp->qp_num, remote.qpn);
  }
  // No rank posts before every QP of every rank is at least RTR: a request reaching a QP still in
  // INIT is dropped and only recovered by the retry timer.
  bs.barrier();
  connected_ = true;
}

}  // namespace rwin::transport::verbs

namespace rwin::transport {

std::unique_ptr<Transport> make_verbs_transport(const TransportConfig& cfg) {
  return std::make_unique<verbs::VerbsTransport>(cfg);
}

}  // namespace rwin::transport

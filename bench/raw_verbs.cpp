#include "raw_verbs.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "backoff.h"

namespace rwinperf {

namespace rawverbs {
namespace {
void report(const char* what, int rc) noexcept {
  // rdma-core returns an errno value; some older providers return -1 and set errno.
  if (rc != 0) std::fprintf(stderr, "raw verbs: %s failed during teardown: %s\n", what, std::strerror(rc > 0 ? rc : errno));
}
}  // namespace
void CloseDevice::operator()(ibv_context* c) const noexcept { report("ibv_close_device", ibv_close_device(c)); }
void DeallocPd::operator()(ibv_pd* p) const noexcept { report("ibv_dealloc_pd", ibv_dealloc_pd(p)); }
void DestroyCq::operator()(ibv_cq* c) const noexcept { report("ibv_destroy_cq", ibv_destroy_cq(c)); }
void DestroyQp::operator()(ibv_qp* q) const noexcept { report("ibv_destroy_qp", ibv_destroy_qp(q)); }
void DeregMr::operator()(ibv_mr* m) const noexcept { report("ibv_dereg_mr", ibv_dereg_mr(m)); }
void Free::operator()(void* p) const noexcept { std::free(p); }
}  // namespace rawverbs

namespace {

constexpr size_t kSigBytes = 4096;
// Queue depth, inline size, ack timeout, retries, rd_atomic: rwin's own (verbs_params.h), and the
// knobs (RWIN_IB_TC, RWIN_IB_TIMEOUT, ...) feed both, so the baseline is set up as what it measures.
namespace vc = rwin::transport::verbs_const;
constexpr uint32_t kBlobMagic = 0x72617776;  // "rawv"

// What each side tells the other; both ranks run the same binary, so a memcpy of it is the wire
// format.
struct Blob {
  uint32_t magic = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t mtu = 0;
  uint8_t link_layer = 0;
  uint8_t gid[16] = {};
  uint64_t addr[3] = {};  // src, dst, signals
  uint32_t rkey[3] = {};
  uint8_t gid_type = 0;        // rwin::transport::GidType
  uint8_t rd_atomic_init = 0;  // as rwin's QpAddress (verbs_blob.h)
  uint8_t rd_atomic_resp = 0;
  uint8_t pad = 0;
};
static_assert(std::is_trivially_copyable_v<Blob>);

// Raw waits idle exactly like rwin's (so the two compare like for like, and a long wait does not
// hold a vCPU of the guest that also carries rxe's packet processing).
using rwin::detail::Backoff;

uint32_t random_psn() {
  std::random_device rd;
  return rd() & 0xffffff;
}

}  // namespace

void RawVerbs::fail(const std::string& what) const {
  throw std::runtime_error(describe() + ": rank " + std::to_string(rank_) + " peer " + std::to_string(peer_) + ": " +
                           what);
}

RawVerbs::RawVerbs(rwin::Context& ctx, int peer, size_t bytes, std::chrono::milliseconds timeout)
    : rank_(ctx.rank()), peer_(peer), timeout_(timeout), bytes_(bytes) {
  const rwin::Options& opt = ctx.options();  // RWIN_IB_DEVICE / RWIN_IB_PORT / RWIN_GID_INDEX resolved
  port_ = opt.ib_port;
  Blob mine{};
  ibv_port_attr pa{};
  ibv_device_attr da{};
  if (peer_ >= 0) {
    // ---- device, port, GID: rwin's own choice (verbs_device.h), with the same knobs ----
    rwin::transport::TransportConfig tc;
    tc.ib_device = opt.ib_device;
    tc.ib_port = opt.ib_port;
    tc.gid_index = opt.gid_index;
    try {
      params_ = rwin::transport::VerbsParams::from_env();
      tc.verbs = params_;
      ctx_.reset(rwin::transport::verbs::open_device(tc, choice_).release());
    } catch (const rwin::transport::TransportError& e) {
      fail(e.what());
    }
    dev_name_ = choice_.name;
    gid_index_ = choice_.gid_index;
    da = choice_.dev_attr;
    pa = choice_.port_attr;
    const ibv_gid gid = choice_.gid;

    // ---- PD, buffers, MRs ----
    pd_.reset(ibv_alloc_pd(ctx_.get()));
    if (!pd_) fail(std::string("ibv_alloc_pd: ") + std::strerror(errno));
    const int access =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    auto alloc = [&](size_t len, std::unique_ptr<void, rawverbs::Free>& buf, std::unique_ptr<ibv_mr, rawverbs::DeregMr>& mr) {
      const size_t rounded = (len + 4095) / 4096 * 4096;
      buf.reset(std::aligned_alloc(4096, rounded));
      if (!buf) fail("aligned_alloc of " + std::to_string(rounded) + " bytes failed");
      std::memset(buf.get(), 0, rounded);
      mr.reset(ibv_reg_mr(pd_.get(), buf.get(), rounded, access));
      if (!mr) fail("ibv_reg_mr of " + std::to_string(rounded) + " bytes: " + std::strerror(errno));
    };
    alloc(bytes, src_buf_, src_mr_);
    alloc(bytes, dst_buf_, dst_mr_);
    alloc(kSigBytes, sig_buf_, sig_mr_);
    alloc(8, result_buf_, result_mr_);
    sig_ = static_cast<int64_t*>(sig_buf_.get());

    // ---- CQ, QP -> INIT ----
    sq_depth_ = std::min<uint32_t>({vc::kMaxSqDepth, static_cast<uint32_t>(da.max_qp_wr), static_cast<uint32_t>(da.max_cqe)});
    cq_.reset(ibv_create_cq(ctx_.get(), static_cast<int>(sq_depth_), nullptr, nullptr, 0));
    if (!cq_) fail("ibv_create_cq of " + std::to_string(sq_depth_) + " entries: " + std::strerror(errno));
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_.get();
    qa.recv_cq = cq_.get();
    qa.qp_type = IBV_QPT_RC;
    qa.sq_sig_all = 0;
    qa.cap.max_send_wr = sq_depth_;
    qa.cap.max_recv_wr = 1;  // never used; some providers reject 0
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    for (uint32_t want : vc::kWantInline) {  // as the transport asks: less until the provider agrees
      qa.cap.max_inline_data = want;
      qp_.reset(ibv_create_qp(pd_.get(), &qa));
      if (qp_) break;
    }
    if (!qp_) fail("ibv_create_qp (rc, " + std::to_string(sq_depth_) + " send slots): " + std::strerror(errno));
    max_inline_ = qa.cap.max_inline_data;
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.pkey_index = 0;
    at.port_num = static_cast<uint8_t>(port_);
    at.qp_access_flags = access;
    if (int rc = ibv_modify_qp(qp_.get(), &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
      fail(std::string("ibv_modify_qp to init: ") + std::strerror(rc));
    }
    mine.magic = kBlobMagic;
    mine.qpn = qp_->qp_num;
    mine.psn = random_psn();
    mine.lid = pa.lid;
    mine.mtu = static_cast<uint8_t>(pa.active_mtu);
    mine.link_layer = pa.link_layer;
    std::memcpy(mine.gid, gid.raw, 16);
    mine.gid_type = static_cast<uint8_t>(choice_.gid_type);
    mine.rd_atomic_init = rwin::transport::rd_atomic_advertised(da.max_qp_init_rd_atom);
    mine.rd_atomic_resp = rwin::transport::rd_atomic_advertised(da.max_qp_rd_atom);
    mine.addr[0] = reinterpret_cast<uint64_t>(src_buf_.get());
    mine.addr[1] = reinterpret_cast<uint64_t>(dst_buf_.get());
    mine.addr[2] = reinterpret_cast<uint64_t>(sig_buf_.get());
    mine.rkey[0] = src_mr_->rkey;
    mine.rkey[1] = dst_mr_->rkey;
    mine.rkey[2] = sig_mr_->rkey;
  }

  // ---- exchange (every rank takes part; ranks outside the pair send an empty blob) ----
  std::vector<uint8_t> blob;
  if (peer_ >= 0) {
    blob.resize(sizeof(Blob));
    std::memcpy(blob.data(), &mine, sizeof(Blob));
  }
  const auto all = ctx.allgather(blob);
  if (peer_ >= 0) {
    const auto& pb = all.at(static_cast<size_t>(peer_));
    Blob remote{};
    if (pb.size() != sizeof(Blob)) fail("connection blob of " + std::to_string(pb.size()) + " bytes, expected " + std::to_string(sizeof(Blob)));
    std::memcpy(&remote, pb.data(), sizeof(Blob));
    if (remote.magic != kBlobMagic) fail("connection blob has a bad magic");
    if (remote.link_layer != pa.link_layer) fail("peer is on link layer " + std::to_string(remote.link_layer) + ", this port on " + std::to_string(pa.link_layer));
    if (remote.gid_type != 0 && mine.gid_type != 0 && remote.gid_type != mine.gid_type) {
      fail(std::string("peer uses a ") + rwin::transport::gid_type_name(static_cast<rwin::transport::GidType>(remote.gid_type)) +
           " GID, this side a " + rwin::transport::gid_type_name(choice_.gid_type) + " GID");
    }
    rwin::transport::RdAtomic rd;
    if (std::string why = rwin::transport::rd_atomic_limits(da.max_qp_init_rd_atom, da.max_qp_rd_atom,
                                                            remote.rd_atomic_init, remote.rd_atomic_resp, rd);
        !why.empty()) {
      fail(why);
    }
    peer_src_ = remote.addr[0];
    peer_dst_ = remote.addr[1];
    peer_sig_ = remote.addr[2];
    rkey_src_ = remote.rkey[0];
    rkey_dst_ = remote.rkey[1];
    rkey_sig_ = remote.rkey[2];

    // ---- INIT -> RTR -> RTS ----
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = static_cast<ibv_mtu>(std::min<int>(pa.active_mtu, remote.mtu));  // both ends carry the smaller
    at.dest_qp_num = remote.qpn;
    at.rq_psn = remote.psn;
    at.max_dest_rd_atomic = rd.max_dest_rd_atomic;
    at.min_rnr_timer = vc::kMinRnrTimer;
    rwin::transport::verbs::fill_path(at.ah_attr, choice_, params_, remote.gid, remote.lid);
    if (int rc = ibv_modify_qp(qp_.get(), &at,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
      fail("ibv_modify_qp to rtr (remote qpn " + std::to_string(remote.qpn) + "): " + std::strerror(rc));
    }
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.timeout = params_.ack_timeout;
    at.retry_cnt = params_.retry_count;
    at.rnr_retry = vc::kRnrRetry;
    at.sq_psn = mine.psn;
    at.max_rd_atomic = rd.max_rd_atomic;
    if (int rc = ibv_modify_qp(qp_.get(), &at,
                               IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                   IBV_QP_MAX_QP_RD_ATOMIC)) {
      fail(std::string("ibv_modify_qp to rts: ") + std::strerror(rc));
    }
  }
  // Nobody posts before the peer's QP is at least RTR: a request reaching a QP in INIT is dropped
  // and recovered only by the ack timeout's retry timer.
  ctx.barrier();
}

int RawVerbs::poll(const char* during) {
  ibv_wc wc[16];
  const int n = ibv_poll_cq(cq_.get(), 16, wc);
  if (n < 0) fail(std::string("ibv_poll_cq failed during ") + during);
  for (int i = 0; i < n; ++i) {
    --outstanding_;
    if (wc[i].status != IBV_WC_SUCCESS) {
      const char* op = wc[i].wr_id == kWrite ? "rdma write" : wc[i].wr_id == kRead ? "rdma read" : "atomic fetch-add";
      fail(std::string(op) + " completed with error during " + during + ": " + ibv_wc_status_str(wc[i].status) +
           " (vendor error " + std::to_string(wc[i].vendor_err) + ")");
    }
  }
  return n;
}

void RawVerbs::drain_to(uint32_t left, const char* what, size_t remote_off, size_t bytes) {
  const auto deadline = Clock::now() + timeout_;
  Backoff backoff;
  for (uint32_t n = 0; outstanding_ > left; ++n) {
    if (poll(what) > 0) continue;
    backoff.idle();
    if ((n & 255) == 255 && Clock::now() > deadline) {
      fail(std::string(what) + " at remote offset " + std::to_string(remote_off) + ", " + std::to_string(bytes) +
           " bytes: " + std::to_string(outstanding_) + " completions still outstanding after " +
           std::to_string(timeout_.count()) + " ms");
    }
  }
}

void RawVerbs::post(ibv_send_wr& wr, const char* what, size_t remote_off, size_t bytes) {
  if (outstanding_ >= sq_depth_) drain_to(sq_depth_ - 1, what, remote_off, bytes);  // free one slot
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), &wr, &bad)) {
    fail(std::string("ibv_post_send(") + what + ") at remote offset " + std::to_string(remote_off) + ", " +
         std::to_string(bytes) + " bytes: " + std::strerror(rc));
  }
  ++outstanding_;
}

void RawVerbs::put(size_t src_off, size_t dst_off, size_t bytes) {
  if (src_off + bytes > bytes_ || dst_off + bytes > bytes_) fail("put out of range");
  ibv_sge sge{reinterpret_cast<uint64_t>(src()) + src_off, static_cast<uint32_t>(bytes), src_mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kWrite;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (bytes <= max_inline_) wr.send_flags |= IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = peer_dst_ + dst_off;
  wr.wr.rdma.rkey = rkey_dst_;
  post(wr, "rdma write", dst_off, bytes);
  drain_to(0, "rdma write", dst_off, bytes);  // completions arrive in order on one QP
}

void RawVerbs::get_nb(size_t dst_off, size_t src_off, size_t bytes) {
  if (src_off + bytes > bytes_ || dst_off + bytes > bytes_) fail("get out of range");
  ibv_sge sge{reinterpret_cast<uint64_t>(dst()) + dst_off, static_cast<uint32_t>(bytes), dst_mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kRead;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer_src_ + src_off;
  wr.wr.rdma.rkey = rkey_src_;
  post(wr, "rdma read", src_off, bytes);
}

void RawVerbs::get(size_t dst_off, size_t src_off, size_t bytes) {
  get_nb(dst_off, src_off, bytes);
  drain_to(0, "rdma read", src_off, bytes);
}

void RawVerbs::notify(int word) {
  if (word < 0 || static_cast<size_t>(word) * 8 >= kSigBytes) fail("signal word out of range");
  ibv_sge sge{reinterpret_cast<uint64_t>(result_buf_.get()), 8, result_mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kAtomic;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.send_flags = IBV_SEND_SIGNALED;  // frees its slot; reaped by wait/quiet/the next blocking op
  wr.wr.atomic.remote_addr = peer_sig_ + static_cast<uint64_t>(word) * 8;
  wr.wr.atomic.compare_add = 1;
  wr.wr.atomic.rkey = rkey_sig_;
  post(wr, "atomic fetch-add", static_cast<size_t>(word) * 8, 8);
}

void RawVerbs::quiet() { drain_to(0, "quiet", 0, 0); }

void RawVerbs::wait(int word, int64_t value) {
  std::atomic_ref<int64_t> w(sig_[word]);
  const auto deadline = Clock::now() + timeout_;
  Backoff backoff;
  for (uint64_t n = 0; w.load(std::memory_order_acquire) < value; ++n) {
    if (outstanding_ > 0) poll("wait");
    backoff.idle();
    if ((n & 1023) == 1023 && Clock::now() > deadline) {
      fail("wait timed out on word " + std::to_string(word) + ": expected >= " + std::to_string(value) +
           ", last value " + std::to_string(w.load()) + " after " + std::to_string(timeout_.count()) + " ms");
    }
  }
}

}  // namespace rwinperf

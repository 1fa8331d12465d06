// RawVerbs: the same operations rwin-perf measures, written directly on libibverbs, so that rwin's
// verbs transport can be measured against it inside the same two processes (--vs-raw).
//
// It owns its own device context, PD, one CQ, one RC QP to the measured peer and three registered
// page-aligned buffers (src, dst, signal words), picks the device / port / GID with rwin's own
// open_device() (verbs_device.h: RWIN_IB_DEVICE / RWIN_IB_PORT / RWIN_GID_INDEX through
// rwin::Options, RWIN_IB_GID_TYPE / RWIN_IB_GID_SUBNET), sets its QP up with rwin's constants and
// knobs (verbs_params.h: ack timeout, retries, traffic class, SL, hop limit, rd_atomic rule), and
// exchanges (qpn, psn, gid, lid, mtu, gid type, rd_atomic depths, addresses, rkeys) through
// rwin::Context::allgather.
//
//   put     = IBV_WR_RDMA_WRITE, signaled, wait for its completion (rwin's put also returns only
//             when the source may be reused)
//   notify  = IBV_WR_ATOMIC_FETCH_AND_ADD on the peer's word; no fence: on one RC QP the responder
//             executes requests in order, so earlier writes are placed before the atomic
//   wait    = poll the local word (acquire load), polling the CQ for outstanding completions
//   get     = IBV_WR_RDMA_READ, wait for its completion
//   get_nb  = IBV_WR_RDMA_READ, completed by quiet()
//   quiet   = poll the CQ until nothing is outstanding
// Every WR is signaled, so a send-queue slot is freed by its own completion and the CQ (as deep as
// the send queue) can never overflow.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rwin/rwin.h"
#include "transport/verbs/verbs_device.h"
#include "transport/verbs/verbs_params.h"

namespace rwinperf {

namespace rawverbs {
// One owner per ibv_* handle; deleters never throw (a failed destroy is printed).
struct CloseDevice {
  void operator()(ibv_context* c) const noexcept;
};
struct DeallocPd {
  void operator()(ibv_pd* p) const noexcept;
};
struct DestroyCq {
  void operator()(ibv_cq* c) const noexcept;
};
struct DestroyQp {
  void operator()(ibv_qp* q) const noexcept;
};
struct DeregMr {
  void operator()(ibv_mr* m) const noexcept;
};
struct Free {
  void operator()(void* p) const noexcept;
};
}  // namespace rawverbs

class RawVerbs {
 public:
  // Collective over every rank of `ctx` (allgather + barrier); only `peer` (>= 0) gets a QP.
  // `bytes` per data buffer (src and dst each).
  RawVerbs(rwin::Context& ctx, int peer, size_t bytes, std::chrono::milliseconds timeout);
  ~RawVerbs() = default;  // members release in reverse order: QP, CQ, MRs, buffers, PD, device
  RawVerbs(const RawVerbs&) = delete;
  RawVerbs& operator=(const RawVerbs&) = delete;

  char* src() const noexcept { return static_cast<char*>(src_buf_.get()); }
  char* dst() const noexcept { return static_cast<char*>(dst_buf_.get()); }

  // Local src + src_off -> peer's dst + dst_off; returns when the write has completed.
  void put(size_t src_off, size_t dst_off, size_t bytes);
  // Peer's src + src_off -> local dst + dst_off; returns when the data is here.
  void get(size_t dst_off, size_t src_off, size_t bytes);
  // Non-blocking get; completed by the next quiet().
  void get_nb(size_t dst_off, size_t src_off, size_t bytes);
  void notify(int word);               // peer's signal word += 1, after every earlier put to it
  void wait(int word, int64_t value);  // local word >= value, polling the CQ
  void quiet();                        // every posted WR has completed
  std::string describe() const { return "raw verbs(" + dev_name_ + " port " + std::to_string(port_) + " gid " +
                                        std::to_string(gid_index_) + ")"; }

 private:
  using Clock = std::chrono::steady_clock;
  enum Op : uint64_t { kWrite = 1, kRead = 2, kAtomic = 3 };

  void post(ibv_send_wr& wr, const char* what, size_t remote_off, size_t bytes);
  // Reaps completions; throws on an error completion. Returns how many were reaped.
  int poll(const char* during);
  // Polls until at most `left` WRs are outstanding, or the deadline passes.
  void drain_to(uint32_t left, const char* what, size_t remote_off, size_t bytes);
  [[noreturn]] void fail(const std::string& what) const;

  int rank_;
  int peer_;
  std::chrono::milliseconds timeout_;
  std::string dev_name_;
  int port_ = 1;
  int gid_index_ = -1;
  rwin::transport::verbs::DeviceChoice choice_;  // device, port, GID as rwin's transport chooses them
  rwin::transport::VerbsParams params_;            // the RWIN_IB_* knobs
  size_t bytes_ = 0;
  uint32_t sq_depth_ = 0;
  uint32_t max_inline_ = 0;
  uint32_t outstanding_ = 0;

  // Declaration order = reverse destruction order.
  std::unique_ptr<ibv_context, rawverbs::CloseDevice> ctx_;
  std::unique_ptr<ibv_pd, rawverbs::DeallocPd> pd_;
  std::unique_ptr<void, rawverbs::Free> src_buf_, dst_buf_, sig_buf_, result_buf_;
  std::unique_ptr<ibv_mr, rawverbs::DeregMr> src_mr_, dst_mr_, sig_mr_, result_mr_;
  std::unique_ptr<ibv_cq, rawverbs::DestroyCq> cq_;
  std::unique_ptr<ibv_qp, rawverbs::DestroyQp> qp_;

  int64_t* sig_ = nullptr;
  uint64_t peer_src_ = 0, peer_dst_ = 0, peer_sig_ = 0;
  uint32_t rkey_src_ = 0, rkey_dst_ = 0, rkey_sig_ = 0;
};

}  // namespace rwinperf

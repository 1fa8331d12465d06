// Context, worker and lifecycle of the UCX transport: construction (UCX configuration, the am
// handlers), what it reports (describe, capabilities, per-peer mode), poll()'s progress and
// housekeeping, quiesce(), and the factory.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "transport/ucx/ucx_transport.h"
#include "transport/ucx/ucx_transport_impl.h"

namespace rwin::transport::ucx {

namespace {

// Whether UCX_TLS (null or empty: UCX's default, every transport) lets UCX use tcp: a list naming
// tcp or "all", or an exclusion list ("^...") that does not name it.
bool tls_may_use_tcp(const char* tls) {
  if (tls == nullptr || *tls == '\0') return true;
  std::string list(tls);
  const bool exclude = list[0] == '^';
  if (exclude) list.erase(0, 1);
  bool named = false, all = false;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string t = list.substr(at, end - at);
    named = named || t == "tcp";
    all = all || t == "all";
    at = end + 1;
  }
  return exclude ? !named : (named || all);
}

}  // namespace

UcxTransport::UcxTransport(const TransportConfig& cfg)
    : rank_(cfg.rank), nranks_(cfg.nranks), rma_mode_(cfg.ucx_rma.empty() ? "auto" : cfg.ucx_rma) {
  if (rma_mode_ != "auto" && rma_mode_ != "native" && rma_mode_ != "am") {
    throw TransportError("ucx: rma mode '" + rma_mode_ + "' is not one of auto, native, am");
  }
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) throw TransportError("ucx: ucp_config_read failed: " + status_text(s));
  // Keep UCX's tcp on the interface that reaches the root (a host may have several). Only where
  // the user did not choose devices and no RDMA device exists: NET_DEVICES would hide those.
  const char* devices = std::getenv("UCX_NET_DEVICES");
  if (!cfg.ifname.empty() && (devices == nullptr || *devices == '\0') && !have_rdma_devices()) {
    ucp_config_modify(config, "NET_DEVICES", cfg.ifname.c_str());
    net_device_ = cfg.ifname;
  }
  // Without RDMA devices UCX reaches remote peers over tcp. In UCX 1.13 a peer dying while a
  // zero-copy tcp send to it is in flight crashed survivors inside ucp_worker_progress (assertions
  // tcp_ep.c:939 PUT_TX_WAITING_ACK and uct_iface.h:884 comp->count > 0; fault suite on a loaded
  // host, a few percent of kill trials): so by default UCP copies instead (ZCOPY_THRESH=inf; a
  // UCT option such as TCP_PUT_ENABLE cannot be set through the ucp config: UCX warns it invalid).
  // Costs tcp bandwidth (bench/RESULTS.md); RWIN_UCX_TCP_ZCOPY=1 or the user's own
  // UCX_ZCOPY_THRESH take it back.
  if (!cfg.ucx_tcp_zcopy && !have_rdma_devices()) {
    const char* zt = std::getenv("UCX_ZCOPY_THRESH");
    if (zt == nullptr || *zt == '\0') {
      const ucs_status_t zs = ucp_config_modify(config, "ZCOPY_THRESH", "inf");
      safe_tcp_ = zs == UCS_OK;
      if (zs != UCS_OK) RWIN_LOG(Warn, Ucx, "rwin: ucx: cannot set ZCOPY_THRESH=inf: %s", ucs_status_string(zs));
    }
  }
  // UCX's tcp sends an eager message in TX_SEG_SIZE fragments (8 KiB by default: one header and
  // one send() each), and the am mode sends a put as one message up to 512 KiB: 64 KiB fragments
  // (the size UCX's tcp receives in by default) cut a 64 KiB put from 8 sends to 1 (bench/RESULTS.md,
  // issue 14). Set as "TX_SEG_SIZE": UCP applies unprefixed UCT fields to every transport that has
  // one (only tcp does here: no RDMA devices), while "TCP_TX_SEG_SIZE" is refused as invalid
  // (strace showed 8 KiB sends with it). The user's UCX_TCP_TX_SEG_SIZE wins.
  if (!have_rdma_devices() && tls_may_use_tcp(std::getenv("UCX_TLS"))) {  // else UCX warns the key unused
    const char* ts = std::getenv("UCX_TCP_TX_SEG_SIZE");
    if (ts == nullptr || *ts == '\0') {
      const ucs_status_t ss = ucp_config_modify(config, "TX_SEG_SIZE", kTcpTxSegSize);
      if (ss != UCS_OK) RWIN_LOG(Warn, Ucx, "rwin: ucx: cannot set TX_SEG_SIZE=%s: %s", kTcpTxSegSize, ucs_status_string(ss));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64 | UCP_FEATURE_AMO32;
  // The am feature only where am may be used, so "native" is exactly the former configuration.
  if (rma_mode_ != "native") params.features |= UCP_FEATURE_AM;
  // Run-time peers (agents, unless RWIN_AGENT_UCX_WAKEUP=0): an idle progress thread sleeps on the
  // worker's event descriptor (wait_fd/arm) instead of polling on a timer; arm() refuses while a
  // request of ours is in UCX's hands (docs/AGENT.md: the stall that rule ended). Never for an SPMD job.
  const bool wakeup = cfg.dynamic_peers && cfg.ucx_wakeup;
  if (wakeup) params.features |= UCP_FEATURE_WAKEUP;
  ucp_context_h ctx = nullptr;
  s = ucp_init(&params, config, &ctx);
  ucp_config_release(config);
  if (s != UCS_OK) throw TransportError("ucx: ucp_init failed: " + status_text(s));
  context_.reset(ctx);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // A Context is used by one thread; an agent's calls come from any thread, one at a time (its mutex).
  wp.thread_mode = cfg.dynamic_peers ? UCS_THREAD_MODE_SERIALIZED : UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  s = ucp_worker_create(context_.get(), &wp, &worker);
  if (s != UCS_OK) throw TransportError("ucx: ucp_worker_create failed: " + status_text(s));
  worker_.reset(worker);
  if (wakeup) {
    int efd = -1;
    s = ucp_worker_get_efd(worker_.get(), &efd);
    if (s == UCS_OK) {
      event_fd_ = efd;
    } else {  // the caller then polls on a schedule: slower to wake, still correct
      RWIN_LOG(Warn, Ucx, "rwin: ucx: ucp_worker_get_efd failed (%s): idle progress polls on a timer",
               ucs_status_string(s));
    }
  }
  const char* tls = std::getenv("UCX_TLS");
  tls_ = tls && *tls ? tls : "all";
  peers_.resize(static_cast<size_t>(nranks_));
  inbound_.resize(static_cast<size_t>(nranks_));
  const char* rt = std::getenv("UCX_RNDV_THRESH");
  if (rt && *rt) eager_max_ = 0;  // the user tunes UCP's choice: leave it to UCP entirely
  if (rma_mode_ != "native") {
    set_am_handler(kAmRequestId, &UcxTransport::on_am_request);
    set_am_handler(kAmReplyId, &UcxTransport::on_am_reply);
    set_am_handler(kAmBatchId, &UcxTransport::on_am_batch);
  }
}

UcxTransport::~UcxTransport() {
  quiesce(false);  // the core has quiesced already; this covers a transport used on its own
  for (OutReply* r : replies_) delete r;
  for (OutReply* r : replies_sent_) delete r;
  for (RecvCtx* r : recvs_) delete r;
}

std::string UcxTransport::describe() const {
  std::string s = "ucx(" + tls_ + (net_device_.empty() ? "" : " on " + net_device_);
  int am = 0, direct = 0;
  for (const auto& p : peers_) {
    am += p.am ? 1 : 0;
    direct += p.direct ? 1 : 0;
  }
  if (direct == nranks_ && direct > 0) {
    s += ", direct shm";
  } else if (direct > 0) {
    s += ", direct shm to " + std::to_string(direct) + " of " + std::to_string(nranks_) + " peers";
  }
  if (am == nranks_ && am > 0) {
    s += ", am rma";
  } else if (am > 0) {
    s += ", am rma to " + std::to_string(am) + " of " + std::to_string(nranks_) + " peers";
  }
  if (safe_tcp_ && am > 0) s += ", copied tcp sends";
  return s + ")";
}

Capabilities UcxTransport::capabilities() const {
  Capabilities c;
  c.max_message_bytes = SIZE_MAX;  // UCX fragments internally; the core still chunks to pipeline
  c.write_then_atomic_ordered = false;  // per peer: write_then_atomic_ordered(peer)
  c.needs_target_progress = true;  // true over tcp; harmless (one progress call) over shm
  c.native_set = true;             // UCP_ATOMIC_OP_SWAP / the am target's exchange
  c.local_needs_registration = false;  // any local pointer (UcxCallerMemory)
  c.cpu_atomics = !nic_atomics_;
  return c;
}

std::string UcxTransport::rma_mode(int peer) const {
  if (peer < 0 || peer >= nranks_) return "native";
  const Peer& p = peers_[static_cast<size_t>(peer)];
  return p.direct ? "direct" : p.am ? "am" : "native";
}

bool UcxTransport::write_then_atomic_ordered(int peer) const {
  return peer >= 0 && peer < nranks_ && (peers_[static_cast<size_t>(peer)].am || peers_[static_cast<size_t>(peer)].direct);
}

void UcxTransport::poll(std::vector<Completion>& out) {
  if (quiesced_) {
    for (auto& c : done_) out.push_back(std::move(c));
    done_.clear();
    return;
  }
  // Work that finished inline (shm puts, most small ops) is handed back without touching the
  // worker; otherwise a few rounds of progress, as one call may advance a protocol by one step.
  // The core polls again while it waits, so targets of emulated ops still progress.
  // With am peers, a round that queued a reply or completed work stops the loop: the reply
  // leaves (and the completion returns) one progress syscall sooner.
  if (done_.empty()) {
    for (int i = 0; i < 4 && ucp_worker_progress(worker_.get()) != 0; ++i) {
      if (any_am_ && (!replies_.empty() || !done_.empty())) break;
    }
  }
  if (!closing_reqs_.empty()) reap_closes();
  if (am_work_) {
    drain_backlogs();
    send_replies();
    fail_abandoned();
    am_work_ = !replies_.empty() || backlog_count_ > 0;
  }
  if (!done_.empty()) {
    for (auto& c : done_) out.push_back(std::move(c));
    done_.clear();
  }
}

bool UcxTransport::arm() noexcept {
  // Our own queues first: completions not handed out, replies or backlogs poll() still sends,
  // endpoint closes to reap. None of them raises an event, so they must not be slept through.
  // Nor may any request of ours that UCX still holds (an operation, a reply, a rendezvous receive):
  // UCX raises no event when a send it queued (a full shared-memory FIFO, a rendezvous pipeline)
  // may go on, so its progress must not wait for one (seen: a 1 MiB am put over posix/sysv
  // stalling 200 ms a step until its 20 s deadline when the initiator slept here).
  if (event_fd_ < 0 || quiesced_ || !done_.empty() || am_work_ || !closing_reqs_.empty()) return false;
  if (all_.size() != pool_.size() || !replies_sent_.empty() || !recvs_.empty()) return false;
  const ucs_status_t s = ucp_worker_arm(worker_.get());
  if (s == UCS_OK) return true;
  if (s != UCS_ERR_BUSY) {  // never seen; falling back to timed polling keeps the caller correct
    RWIN_LOG(Warn, Ucx, "rwin: ucx: ucp_worker_arm failed (%s): idle progress polls on a timer from now on",
             ucs_status_string(s));
    event_fd_ = -1;
  }
  return false;
}

void UcxTransport::quiesce(bool graceful) noexcept {
  if (quiesced_) return;
  // Staged writes completed to the caller: they leave before the endpoints close (the core's
  // shutdown barrier flushes them already).
  for (auto& peer : peers_) {
    if (graceful && peer.stage && peer.error.empty() && peer.ep) send_stage(peer, nullptr);
  }
  // Descriptors we still hold go back to UCX while the worker exists.
  for (int p = 0; p < nranks_; ++p) release_inbound(p);
  close_endpoints(graceful);
  // Callbacks UCX runs while the worker is destroyed must touch nothing but their request.
  closing_ = true;
  probe_.reset();
  // With the worker gone no socket, shared-memory queue or rendezvous receive is left that
  // could write into a window: the core may now unmap them (ucp_mem_unmap needs the context
  // only, which lives on).
  worker_.reset();
  quiesced_ = true;
  event_fd_ = -1;  // closed with the worker
  for (int p = 0; p < nranks_; ++p) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    if (peer.error.empty()) {
      peer.error = "ucx(" + tls_ + "): rank " + std::to_string(rank_) + " -> peer " + std::to_string(p) +
                   ": transport closed (context shutting down)";
    }
  }
}

void UcxTransport::set_am_handler(uint16_t id, ucp_am_recv_callback_t cb) {
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = id;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  hp.cb = cb;
  hp.arg = this;
  const ucs_status_t s = ucp_worker_set_am_recv_handler(worker_.get(), &hp);
  if (s != UCS_OK) throw TransportError("ucx: ucp_worker_set_am_recv_handler failed: " + status_text(s));
}

}  // namespace rwin::transport::ucx

namespace rwin::transport {

std::unique_ptr<Transport> make_ucx_transport(const TransportConfig& cfg) {
  return std::make_unique<ucx::UcxTransport>(cfg);
}

}  // namespace rwin::transport

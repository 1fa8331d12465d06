// Wire-up and endpoints of the UCX transport: the worker-address exchange, the per-peer mode
// choice (probe region), endpoint creation and its error handler, the wire-up flush and barrier,
// closing endpoints, and a peer's (sticky) failure.
#include <chrono>

#include "bootstrap/bootstrap.h"
#include "common/log.h"
#include "transport/ucx/ucx_blob.h"
#include "transport/ucx/ucx_transport_impl.h"

namespace rwin::transport::ucx {

void UcxTransport::connect(bootstrap::Bootstrap& bs) {
  // The probe region tells a peer whether it reaches us through shared memory (see the notes).
  if (rma_mode_ == "auto") probe_ = std::make_unique<UcxMemory>(context_.get(), kProbeBytes, nullptr);
  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  ucs_status_t s = ucp_worker_get_address(worker_.get(), &addr, &addr_len);
  if (s != UCS_OK) throw TransportError("ucx: ucp_worker_get_address failed: " + status_text(s));
  // Blob (ucx_blob.h): the worker address and, under auto, the probe region's base and key.
  const std::vector<uint8_t> blob = ucx_blob::pack_addr(
      std::span(reinterpret_cast<const uint8_t*>(addr), addr_len),
      probe_ ? reinterpret_cast<uint64_t>(probe_->addr()) : 0,
      probe_ ? std::span<const uint8_t>(probe_->raw_key()) : std::span<const uint8_t>());
  ucp_worker_release_address(worker_.get(), addr);

  const auto all = bs.allgather(blob);
  for (int p = 0; p < nranks_; ++p) {
    const auto& b = all[static_cast<size_t>(p)];
    const auto bad = [&] {
      return TransportError("ucx: rank " + std::to_string(rank_) + ": malformed worker address from rank " +
                            std::to_string(p) + " (" + std::to_string(b.size()) + " bytes)");
    };
    const auto a = ucx_blob::parse_addr(b);
    if (!a) throw bad();
    Peer& peer = peers_[static_cast<size_t>(p)];
    peer.ep = create_ep(p, a->address.data());
    peer.am = choose_am(p, peer.ep, a->probe_base, a->probe_key.data(), a->probe_key.size(), peer.direct);
    any_am_ = any_am_ || peer.am;
    RWIN_LOG(Debug, Ucx, "ucx(%s): rank %d -> peer %d: endpoint created (%zu-byte worker address), rma mode %s%s", tls_.c_str(),
             rank_, p, a->address.size(), peer.direct ? "direct" : peer.am ? "am" : "native",
             a->probe_key.empty() ? "" : ", probe key received");
    if (peer.am && p != rank_) {
      // An am peer is reached over tcp: give it an endpoint with peer-failure handling. With
      // MODE_NONE, UCX 1.13's tcp transport asserted (tcp_ep.c:939, PUT_TX_WAITING_ACK) in a
      // survivor's progress when other ranks vanished mid-transfer (fault suite, loaded host).
      // The probe endpoint closes with a flush (every rank is alive and progressing in wire-up).
      if (ucp_ep_h h = create_ep(p, b.data() + 16, UCP_ERR_HANDLING_MODE_PEER, true)) {
        ucp_request_param_t param{};
        ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
        if (r && UCS_PTR_IS_PTR(r)) closing_reqs_.push_back(r);
        peer.ep = h;
      }
    }
  }
  for (const Peer& peer : peers_) nic_atomics_ = nic_atomics_ || (!peer.direct && !peer.am);
  nic_atomics_ = nic_atomics_ && have_rdma_devices();
  wire_up(bs);
  RWIN_LOG(Debug, Ucx, "ucx(%s): rank %d: wired up to %d ranks%s", tls_.c_str(), rank_, nranks_,
           nic_atomics_ ? "; atomics through UCX for every peer (native RMA on an RDMA device)" : "");
}

std::string UcxTransport::peer_error(int peer) const {
  if (peer < 0 || peer >= nranks_) return {};
  return peers_[static_cast<size_t>(peer)].error;
}

void UcxTransport::fail_peer(int p, const std::string& why) noexcept {
  if (p < 0 || p >= nranks_ || quiesced_) return;
  Peer& peer = peers_[static_cast<size_t>(p)];
  if (peer.error.empty()) peer.error = why;
  peer_failed_ = true;  // poll() fails the work still waiting for this peer's replies
  am_work_ = true;
  if (peer.stage) {  // its writes already completed to the caller; nobody will receive them
    batch_pool_.push_back(peer.stage);
    peer.stage = nullptr;
  }
  release_inbound(p);
  if (peer.ep && !peer.direct) {
    // Force: a dead peer acknowledges nothing. UCX cancels the endpoint's requests (their
    // callbacks run from later progress) and closes its sockets, so nothing more arrives from it.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
    if (r && UCS_PTR_IS_PTR(r)) closing_reqs_.push_back(r);
    peer.ep = nullptr;
  }
  // A direct (shared-memory) peer keeps its endpoint until quiesce(): no request of ours waits
  // on it (every direct op completes inside post()), and its mapping of our memory stays valid
  // for as long as it lives, whatever we do.
}

// Also sets `direct` for a peer whose memory UCX maps into this process (auto only).
bool UcxTransport::choose_am(int peer, ucp_ep_h ep, uint64_t probe_base, const uint8_t* probe_key, uint64_t probe_len,
                             bool& direct) {
  direct = false;
  if (rma_mode_ == "native") return false;
  if (rma_mode_ == "am") return true;
  // No probe: the peer runs "native" or "am". Native RMA reaches both (an "am" rank still serves
  // UCX's emulation); am messages would find no handler at a "native" rank.
  if (probe_len == 0) return false;
  ucp_rkey_h rkey = nullptr;
  const ucs_status_t s = ucp_ep_rkey_unpack(ep, probe_key, &rkey);
  if (s != UCS_OK) {
    throw TransportError("ucx: rank " + std::to_string(rank_) + ": ucp_ep_rkey_unpack of the probe key of rank " +
                         std::to_string(peer) + " failed: " + status_text(s));
  }
  void* ptr = nullptr;
  const bool shared = ucp_rkey_ptr(rkey, probe_base, &ptr) == UCS_OK;
  ucp_rkey_destroy(rkey);
  if (shared) {
    direct = true;
    return false;
  }
  return !have_rdma_devices();
}

// Frees the force-close requests of failed peers' endpoints that have finished.
void UcxTransport::reap_closes() noexcept {
  std::erase_if(closing_reqs_, [](ucs_status_ptr_t r) {
    if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
    ucp_request_free(r);
    return true;
  });
}

ucp_ep_h UcxTransport::create_ep(int peer, const uint8_t* address, ucp_err_handling_mode_t mode,
                                 bool may_fail) {
  err_args_.push_back(ErrArg{this, peer});
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address);
  // Error handling mode NONE by default, deliberately: in UCX 1.13 the shared-memory transports
  // (posix, sysv, self) have no peer-failure handler, so asking for MODE_PEER makes UCP route every
  // operation, even between two processes on one node, over tcp active messages (measured with
  // UCX_LOG_LEVEL=info: "rma_am(tcp/lo) amo_am(tcp/lo)"). Peers that talk am over tcp anyway get
  // MODE_PEER (see connect). A dead peer is caught by the bootstrap lease in any case.
  ep.err_mode = mode;
  ep.err_handler.cb = &UcxTransport::on_ep_error;
  ep.err_handler.arg = &err_args_.back();
  ucp_ep_h h = nullptr;
  const ucs_status_t s = ucp_ep_create(worker_.get(), &ep, &h);
  if (s != UCS_OK && may_fail) return nullptr;
  if (s != UCS_OK) {
    throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": ucp_ep_create to rank " +
                         std::to_string(peer) + " failed: " + status_text(s));
  }
  return h;
}

void UcxTransport::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* a = static_cast<ErrArg*>(arg);
  UcxTransport* self = a->self;
  if (self->closing_) return;
  Peer& peer = self->peers_[static_cast<size_t>(a->peer)];
  if (peer.error.empty()) {
    peer.error = "ucx(" + self->tls_ + "): rank " + std::to_string(self->rank_) + " -> peer " +
                 std::to_string(a->peer) + ": endpoint failed: " + status_text(status);
  }
  self->peer_failed_ = true;
  self->am_work_ = true;
}

// Finishes UCX's wire-up to every peer before connect() returns. Over tcp an endpoint is half
// made until the two workers exchange wire-up messages during progress; left to the first
// operation, a peer that dies before then leaves the endpoint mid-wire-up, and tearing that down
// trips an assertion inside UCX 1.13 (wireup_ep.c: pending_count == 0; seen in the dead-peer
// contract tests). A flush per endpoint completes its wire-up; a barrier through the store that
// keeps progressing lets every rank answer its peers' wire-up until all are done.
void UcxTransport::wire_up(bootstrap::Bootstrap& bs) {
  const auto deadline = std::chrono::steady_clock::now() + bs.startup_timeout();
  std::vector<ucs_status_ptr_t> reqs(static_cast<size_t>(nranks_), nullptr);
  for (int p = 0; p < nranks_; ++p) {
    ucp_request_param_t param{};
    ucs_status_ptr_t r = ucp_ep_flush_nbx(peers_[static_cast<size_t>(p)].ep, &param);
    if (UCS_PTR_IS_ERR(r)) {
      throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": wire-up flush to rank " +
                           std::to_string(p) + " failed: " + status_text(UCS_PTR_STATUS(r)));
    }
    reqs[static_cast<size_t>(p)] = r;
  }
  auto release_all = [&] {
    for (auto& r : reqs) {
      if (r != nullptr) ucp_request_free(r);  // an unfinished one completes (or is purged) later
      r = nullptr;
    }
  };
  for (int p = 0; p < nranks_; ++p) {
    ucs_status_ptr_t& r = reqs[static_cast<size_t>(p)];
    while (r != nullptr && ucp_request_check_status(r) == UCS_INPROGRESS) {
      ucp_worker_progress(worker_.get());
      if (std::chrono::steady_clock::now() > deadline) {
        release_all();
        throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": wire-up to rank " +
                             std::to_string(p) + " did not finish within " + std::to_string(bs.startup_timeout().count()) +
                             " ms");
      }
    }
    if (r != nullptr) {
      const ucs_status_t st = ucp_request_check_status(r);
      ucp_request_free(r);
      r = nullptr;
      if (st != UCS_OK) {
        release_all();
        throw TransportError("ucx(" + tls_ + "): rank " + std::to_string(rank_) + ": wire-up flush to rank " +
                             std::to_string(p) + " failed: " + status_text(st));
      }
    }
  }
  const auto left = deadline - std::chrono::steady_clock::now();
  bs.barrier(std::chrono::duration_cast<bootstrap::Millis>(std::max(left, decltype(left)::zero())),
             [this] { ucp_worker_progress(worker_.get()); });
}

// Flush-close every healthy endpoint, force-close failed ones; bounded by 1 s in all (a stopped
// peer never acknowledges a flush: shutdown must not wait for it).
void UcxTransport::close_endpoints(bool graceful) noexcept {
  std::vector<ucs_status_ptr_t> reqs = std::move(closing_reqs_);
  closing_reqs_.clear();
  for (auto& peer : peers_) {
    if (!peer.ep) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = graceful && peer.error.empty() ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(peer.ep, &param);
    if (r && UCS_PTR_IS_PTR(r)) reqs.push_back(r);
    peer.ep = nullptr;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (ucs_status_ptr_t r : reqs) {
    // Not graceful: no progress at all (see quiesce); the worker's destruction releases the rest.
    while (graceful && ucp_request_check_status(r) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline) {
      ucp_worker_progress(worker_.get());
    }
    if (graceful && ucp_request_check_status(r) == UCS_INPROGRESS) {
      RWIN_LOG(Warn, Ucx, "rwin: ucx: rank %d: endpoint close did not finish within 1 s; releasing it", rank_);
    }
    ucp_request_free(r);
  }
}

}  // namespace rwin::transport::ucx

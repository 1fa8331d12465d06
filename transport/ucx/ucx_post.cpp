// post() by peer mode (direct: done inline with ucx_direct.h; native; am) and the life of one
// posted Work (Pending) shared by the native and am paths: send accounting, completion, pool.
#include <cstring>

#include "transport/ucx/ucx_direct.h"
#include "transport/ucx/ucx_transport_impl.h"

namespace rwin::transport::ucx {

PostResult UcxTransport::post(const Work& w) {
  Peer& peer = peers_[static_cast<size_t>(w.peer)];
  if (!peer.error.empty()) return PostResult::PeerFailed;
  if (w.op == Op::Accumulate) {  // capabilities().max_add_bytes is 0: the core never posts one
    done_.push_back(Completion{w.cookie, false, describe() + ": accumulate: the target cannot apply put(Add) itself here"});
    return PostResult::Ok;
  }
  // Direct: done before returning with loads, stores and atomics on the mapped window; atomics
  // and the Flush that completes them go through UCX instead while NIC atomics are in use.
  if (peer.direct && (!nic_atomics_ || w.op == Op::Write || w.op == Op::Read)) {
    const auto* rk = static_cast<const UcxRemoteKey*>(w.rkey);
    // A Flush has no address (a caller may still pass a key): no pointer is formed for it.
    ucx_direct::apply(w, rk && w.op != Op::Flush ? rk->mapped() + (w.remote_addr - rk->base()) : nullptr);
    done_.push_back(Completion{w.cookie, true, {}});
    return PostResult::Ok;
  }
  Pending* p = take();
  p->self = this;
  p->cookie = w.cookie;
  p->op = w.op;
  p->peer = w.peer;
  p->bytes = w.op == Op::Write || w.op == Op::Read ? w.bytes : (w.op == Op::Flush ? 0 : 8);
  p->remote_addr = w.remote_addr;
  p->user_reply = nullptr;
  p->local = nullptr;
  p->status = UCS_OK;
  p->why = nullptr;
  p->token = 0;
  p->waits = 1;
  if (peer.am) {
    post_am(peer, p, w);
  } else {
    post_native(peer, p, w);
  }
  return PostResult::Ok;
}

// Accounts for the request a send-like call returned: immediate, failed or in flight.
void UcxTransport::sent(Pending* p, ucs_status_ptr_t req) {
  if (req == nullptr) {
    step(p, UCS_OK);
  } else if (UCS_PTR_IS_ERR(req)) {
    step(p, UCS_PTR_STATUS(req));
  }
  // else: on_send_done steps it.
}

void UcxTransport::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  UcxTransport* self = p->self;
  ucp_request_free(request);
  if (self->closing_) return;
  self->step(p, status);
}

// One awaited event of `p` happened; completes it after the last one. A failed send also
// gives up on the reply (it may never come), unless the reply's data is already arriving.
void UcxTransport::step(Pending* p, ucs_status_t status) {
  if (status != UCS_OK && p->status == UCS_OK) p->status = status;
  if (status != UCS_OK && p->token != 0 && awaiting_.erase(p->token) != 0) p->waits--;
  if (--p->waits == 0) finish(p);
}

void UcxTransport::finish(Pending* p) {
  Completion c;
  c.cookie = p->cookie;
  c.ok = p->status == UCS_OK;
  if (c.ok) {
    if (p->user_reply) std::memcpy(p->user_reply, &p->reply, 8);
  } else {
    Peer& peer = peers_[static_cast<size_t>(p->peer)];
    c.error = "ucx(" + tls_ + (peer.am ? ", am rma" : "") + "): rank " + std::to_string(rank_) + " -> peer " +
              std::to_string(p->peer) + ": " + op_name(p->op) + " of " + std::to_string(p->bytes) +
              " bytes at remote address 0x" + hex(p->remote_addr) + " failed: " +
              (p->why ? std::string(p->why) + " (" + status_text(p->status) + ")" : status_text(p->status));
    if (peer.error.empty()) peer.error = c.error;
    peer_failed_ = true;
    am_work_ = true;
  }
  p->token = 0;
  done_.push_back(std::move(c));
  pool_.push_back(p);
}

Pending* UcxTransport::take() {
  if (pool_.empty()) {
    all_.push_back(std::make_unique<Pending>());
    return all_.back().get();
  }
  Pending* p = pool_.back();
  pool_.pop_back();
  return p;
}

}  // namespace rwin::transport::ucx

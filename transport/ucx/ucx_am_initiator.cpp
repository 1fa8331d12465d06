// am mode, initiator side (see "am mode protocol" in ucx_transport_impl.h): requests, staged
// batches of small writes, replies, and work abandoned by a failed peer.
#include <cstring>

#include "common/log.h"
#include "transport/ucx/ucx_transport_impl.h"

namespace rwin::transport::ucx {

void UcxTransport::post_am(Peer& peer, Pending* p, const Work& w) {
  AmRequest& h = p->req;
  h = AmRequest{};
  h.op = static_cast<uint8_t>(w.op);
  h.sender = sender_id(peer);
  h.seq = peer.out_seq++;
  h.addr = w.remote_addr;
  h.len = p->bytes;
  h.operand = w.operand;
  h.compare = w.compare;
  const void* payload = nullptr;
  size_t count = 0;
  switch (w.op) {
    case Op::Write:
      payload = w.local;
      count = w.bytes;
      break;
    case Op::AtomicAdd:
      break;
    case Op::Read:
      p->local = w.local;
      break;
    case Op::FetchAdd:
    case Op::Swap:
    case Op::CompareSwap:
      p->user_reply = w.local;  // may be null for Swap
      break;
    case Op::Flush:
    case Op::Accumulate:  // refused in post()
      break;
  }
  if (w.op != Op::Write && w.op != Op::AtomicAdd) {
    p->token = h.token = ++last_token_;
    awaiting_.emplace(p->token, p);
    p->waits = 2;  // send completion and reply
  }
  if (w.op == Op::Write && count <= kStageMax) {
    // Staged: copied now, so the source is reusable and the Write completes (transport.h).
    if (peer.stage && peer.stage->buf.size() + sizeof(AmRequest) + count > kBatchMax) send_stage(peer, nullptr);
    if (!peer.stage) peer.stage = take_batch(p->peer);
    append(*peer.stage, h, payload, count);
    peer.stage->writes++;
    step(p, UCS_OK);
    return;
  }
  if (peer.stage) {
    if (w.op == Op::Write) {
      send_stage(peer, nullptr);  // a large write leaves after the staged ones (seq order anyway)
    } else {
      append(*peer.stage, h, nullptr, 0);  // put + notify: one message
      send_stage(peer, p);
      return;
    }
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &UcxTransport::on_send_done;
  param.user_data = p;
  param.flags = count <= eager_max_ ? UCP_AM_SEND_FLAG_EAGER : 0;
  sent(p, ucp_am_send_nbx(peer.ep, kAmRequestId, &p->req, sizeof(AmRequest), payload, count, &param));
}

void UcxTransport::append(Batch& b, const AmRequest& h, const void* payload, size_t count) {
  ucx_am::append_request(b.buf, h, payload, count);
  b.hdr.count++;
}

Batch* UcxTransport::take_batch(int peer) {
  Batch* b = nullptr;
  if (batch_pool_.empty()) {
    batches_.push_back(std::make_unique<Batch>());
    b = batches_.back().get();
    b->buf.reserve(kBatchMax);
  } else {
    b = batch_pool_.back();
    batch_pool_.pop_back();
  }
  b->self = this;
  b->peer = peer;
  b->hdr = AmBatch{};
  b->hdr.sender = sender_id(peers_[static_cast<size_t>(peer)]);
  b->buf.clear();
  b->writes = 0;
  b->tail = nullptr;
  return b;
}

// Sends the peer's staged batch as one eager message; `tail` (the op appended last, if any)
// completes with that send. Eager always, even where UCX_RNDV_THRESH leaves writes to UCP: the
// batch is bounded (kBatchMax) and the target parses it in its callback.
void UcxTransport::send_stage(Peer& peer, Pending* tail) {
  Batch* b = peer.stage;
  peer.stage = nullptr;
  b->tail = tail;
  b->hdr.bytes = b->buf.size();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &UcxTransport::on_batch_sent;
  param.user_data = b;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  ucs_status_ptr_t req =
      ucp_am_send_nbx(peer.ep, kAmBatchId, &b->hdr, sizeof(AmBatch), b->buf.data(), b->buf.size(), &param);
  if (req == nullptr) {
    batch_done(b, UCS_OK);
  } else if (UCS_PTR_IS_ERR(req)) {
    batch_done(b, UCS_PTR_STATUS(req));
  }
  // else: on_batch_sent finishes it.
}

void UcxTransport::on_batch_sent(void* request, ucs_status_t status, void* user_data) {
  auto* b = static_cast<Batch*>(user_data);
  UcxTransport* self = b->self;
  ucp_request_free(request);
  if (self->closing_) return;
  self->batch_done(b, status);
}

// The staged Writes completed at post(); a failed send fails the peer (their loss surfaces at
// the next op to it) and the tail op with it.
void UcxTransport::batch_done(Batch* b, ucs_status_t status) {
  Pending* tail = b->tail;
  if (status != UCS_OK) {
    Peer& peer = peers_[static_cast<size_t>(b->peer)];
    const std::string e = "ucx(" + tls_ + ", am rma): rank " + std::to_string(rank_) + " -> peer " +
                          std::to_string(b->peer) + ": batch of " + std::to_string(b->hdr.count) + " requests (" +
                          std::to_string(b->writes) + " staged writes, " + std::to_string(b->buf.size()) +
                          " bytes) failed: " + status_text(status);
    RWIN_LOG(Warn, Ucx, "rwin: %s", e.c_str());
    if (peer.error.empty()) peer.error = e;
    peer_failed_ = true;
    am_work_ = true;
    if (tail) tail->why = "the batch message carrying it failed";
  }
  b->tail = nullptr;
  batch_pool_.push_back(b);
  if (tail) step(tail, status);
}

ucs_status_t UcxTransport::on_am_reply(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                       const ucp_am_recv_param_t* param) {
  return static_cast<UcxTransport*>(arg)->handle_reply(header, header_length, data, length, param);
}

ucs_status_t UcxTransport::handle_reply(const void* header, size_t header_length, void* data, size_t length,
                                        const ucp_am_recv_param_t* param) {
  if (closing_) return UCS_OK;
  AmReply r;
  if (!ucx_am::decode_header(header, header_length, r)) {
    RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a reply with a %zu-byte header (expected %zu)", rank_,
             header_length, sizeof(AmReply));
    return UCS_OK;
  }
  auto it = awaiting_.find(r.token);
  // No entry: a reply to work already failed (peer error) or never posted; ignore it.
  if (r.magic != kAmMagic || it == awaiting_.end()) return UCS_OK;
  Pending* p = it->second;
  if (r.sender != p->peer || r.op != static_cast<uint8_t>(p->op)) {
    RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a reply for token %llu claiming rank %d op %u", rank_,
             static_cast<unsigned long long>(r.token), r.sender, unsigned{r.op});
    return UCS_OK;
  }
  awaiting_.erase(it);
  if (r.status != static_cast<uint8_t>(AmStatus::Ok)) {
    p->why = "rejected by the target: address range outside its windows";
    step(p, UCS_ERR_INVALID_ADDR);
    return UCS_OK;
  }
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  if (p->op == Op::Read) {
    if (length != p->bytes) {
      p->why = "reply length differs from the request";
      step(p, UCS_ERR_MESSAGE_TRUNCATED);
      return UCS_OK;  // a rendezvous descriptor we do not receive is dropped by UCX
    }
    if (rndv) {
      ucp_request_param_t rp{};
      rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      rp.cb.recv_am = &UcxTransport::on_read_data;
      rp.user_data = p;
      ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_.get(), data, p->local, length, &rp);
      if (req == nullptr) {
        step(p, UCS_OK);
      } else if (UCS_PTR_IS_ERR(req)) {
        step(p, UCS_PTR_STATUS(req));
      }
      return UCS_INPROGRESS;  // UCX owns the descriptor now
    }
    if (length > 0) std::memcpy(p->local, data, length);
  } else {
    p->reply = r.value;
  }
  step(p, UCS_OK);
  return UCS_OK;
}

void UcxTransport::on_read_data(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  ucp_request_free(request);
  if (p->self->closing_) return;
  p->self->step(p, status);
}

// Work waiting for a reply from a failed peer would wait forever: fail it.
void UcxTransport::fail_abandoned() {
  if (!peer_failed_) return;
  peer_failed_ = false;
  std::vector<Pending*> dead;
  for (auto& [token, p] : awaiting_) {
    if (!peers_[static_cast<size_t>(p->peer)].error.empty()) dead.push_back(p);
  }
  for (Pending* p : dead) {
    awaiting_.erase(p->token);
    p->why = "no reply: the peer failed";
    p->waits--;  // the reply that will not come
    if (p->status == UCS_OK) p->status = UCS_ERR_ENDPOINT_TIMEOUT;
    if (p->waits == 0) finish(p);
  }
}

}  // namespace rwin::transport::ucx

// am mode, target side (see "am mode protocol" in ucx_transport_impl.h): admission in sequence
// order, held and backlogged requests, rendezvous writes into windows, applying requests, and
// the replies owed.
#include <atomic>
#include <cstring>

#include "common/log.h"
#include "transport/ucx/ucx_transport_impl.h"

namespace rwin::transport::ucx {

ucs_status_t UcxTransport::on_am_request(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                         const ucp_am_recv_param_t* param) {
  return static_cast<UcxTransport*>(arg)->handle_request(header, header_length, data, length, param);
}

ucs_status_t UcxTransport::handle_request(const void* header, size_t header_length, void* data, size_t length,
                                          const ucp_am_recv_param_t* param) {
  if (closing_) return UCS_OK;
  AmRequest h;
  if (!ucx_am::decode_header(header, header_length, h)) {
    RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a request with a %zu-byte header (expected %zu)", rank_,
             header_length, sizeof(AmRequest));
    return UCS_OK;  // a rendezvous descriptor we neither keep nor receive is dropped by UCX
  }
  if (!ucx_am::well_formed(h, nranks_)) {
    report_malformed(h);
    return UCS_OK;
  }
  return admit(h, data, length, (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0);
}

void UcxTransport::report_malformed(const AmRequest& h) const {
  RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a malformed request (magic 0x%x, version %u, sender %d, op %u)",
           rank_, h.magic, unsigned{h.version}, h.sender, unsigned{h.op});
}

ucs_status_t UcxTransport::on_am_batch(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                       const ucp_am_recv_param_t* param) {
  return static_cast<UcxTransport*>(arg)->handle_batch(header, header_length, data, length, param);
}

// A batch is its requests in order, each admitted exactly as if it had come alone (own
// sequence number, own validation: an out-of-window Write is dropped and reported at the next
// Flush, the requests around it still apply). Parsing stops only where the framing itself is
// broken (a header that is not a request, a payload running past the message): nothing after
// that point can be located, and it is named on stderr.
ucs_status_t UcxTransport::handle_batch(const void* header, size_t header_length, void* data, size_t length,
                                        const ucp_am_recv_param_t* param) {
  if (closing_) return UCS_OK;
  AmBatch b;
  const bool have_header = ucx_am::decode_header(header, header_length, b);
  if (!have_header || !ucx_am::well_formed(b, nranks_, length) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    RWIN_LOG(Warn, Ucx,
             "rwin: ucx am: rank %d: dropped a malformed batch (%zu-byte header, sender %d, %zu data bytes%s)",
             rank_, header_length, have_header ? b.sender : -1, length,
             (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0 ? ", rendezvous" : "");
    return UCS_OK;  // a rendezvous descriptor we do not receive is dropped by UCX
  }
  auto* d = static_cast<uint8_t*>(data);
  const ucx_am::BatchWalk w =
      ucx_am::walk_batch(d, length, nranks_, [&](const AmRequest& h, size_t payload_at, size_t plen) {
        if (h.sender == b.sender) {
          admit(h, d + payload_at, plen, /*rndv=*/false);
        } else {
          RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped %s claiming rank %d in a batch from rank %d", rank_,
                   op_name(static_cast<Op>(h.op)), h.sender, b.sender);
        }
      });
  if (w.malformed) report_malformed(w.bad);
  if (!w.complete(length, b.count)) {
    RWIN_LOG(Warn, Ucx,
             "rwin: ucx am: rank %d: batch from rank %d broken after %u of %u requests (byte %zu of %zu); "
             "the rest is dropped",
             rank_, b.sender, w.count, b.count, w.off, length);
  }
  return UCS_OK;
}

// Admits one well-formed request in sequence order: applies it, holds it (early) or queues it
// behind pending rendezvous writes. Returns what the AM callback returns for its data.
ucs_status_t UcxTransport::admit(const AmRequest& h, void* data, size_t length, bool rndv) {
  Inbound& in = inbound_[static_cast<size_t>(h.sender)];
  if (h.seq != in.next_seq) {
    if (h.seq < in.next_seq || in.early.count(h.seq) != 0) {
      // A replay of a sequence number already admitted or held: never the sender's protocol.
      RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: dropped a duplicate %s from rank %d with sequence %llu (expected %llu, %zu held)",
               rank_, op_name(static_cast<Op>(h.op)), h.sender, static_cast<unsigned long long>(h.seq),
               static_cast<unsigned long long>(in.next_seq), in.early.size());
      return UCS_OK;
    }
    if (in.early.size() >= kEarlyWarn && !in.warned_early) {
      in.warned_early = true;
      RWIN_LOG(Warn, Ucx, "rwin: ucx am: rank %d: %zu messages from rank %d held out of order, waiting for sequence %llu",
               rank_, in.early.size(), h.sender, static_cast<unsigned long long>(in.next_seq));
    }
    in.early.emplace(h.seq, hold(h, data, length, rndv));
    return rndv ? UCS_INPROGRESS : UCS_OK;
  }
  ++in.next_seq;
  ucs_status_t ret = UCS_OK;
  if (!in.backlog.empty() || must_wait(h, in)) {
    in.backlog.push_back(hold(h, data, length, rndv));
    ++backlog_count_;
    am_work_ = true;
    ret = rndv ? UCS_INPROGRESS : UCS_OK;
  } else if (rndv) {
    ret = receive_write(h, data, length, /*in_callback=*/true) ? UCS_INPROGRESS : UCS_OK;
  } else {
    apply(h, data, length);
  }
  // Messages that arrived early and are now in turn.
  for (auto it = in.early.find(in.next_seq); it != in.early.end(); it = in.early.find(in.next_seq)) {
    Held held = std::move(it->second);
    in.early.erase(it);
    ++in.next_seq;
    in.backlog.push_back(std::move(held));
    ++backlog_count_;
    am_work_ = true;
  }
  // The backlog is drained from poll(), outside this callback.
  return ret;
}

// Whether an in-turn request must wait for the sender's pending rendezvous writes: every
// non-Write does (ordering), and so does a Write overlapping one of them, or the older
// rendezvous data could land over it (the later of two writes to the same bytes must win).
// Only writes to the same bytes serialize (rwin-perf put_bw 1 MiB, blocking puts to one
// address, stayed within noise: 3430-3710 vs 3480-3840 MiB/s before).
bool UcxTransport::must_wait(const AmRequest& h, const Inbound& in) const {
  if (in.rndv_pending == 0) return false;
  if (h.op != static_cast<uint8_t>(Op::Write)) return true;
  for (const RecvCtx* r : recvs_) {
    if (r->sender == h.sender && h.addr < r->addr + r->len && r->addr < h.addr + h.len) return true;
  }
  return false;
}

Held UcxTransport::hold(const AmRequest& h, void* data, size_t length, bool rndv) {
  Held x;
  x.h = h;
  if (rndv) {
    x.desc = data;
    x.rndv_len = length;
  } else if (length > 0) {
    const auto* d = static_cast<const uint8_t*>(data);
    x.payload.assign(d, d + length);
  }
  return x;
}

void UcxTransport::release_held(Held& h) {
  if (h.desc) ucp_am_data_release(worker_.get(), h.desc);
  h.desc = nullptr;
}

// Gives back every rendezvous descriptor held for `sender` and forgets its queued requests.
void UcxTransport::release_inbound(int sender) noexcept {
  Inbound& in = inbound_[static_cast<size_t>(sender)];
  for (auto& [seq, h] : in.early) release_held(h);
  for (auto& h : in.backlog) release_held(h);
  backlog_count_ -= std::min(backlog_count_, in.backlog.size());
  in.early.clear();
  in.backlog.clear();
}

// Applies what waits in front of `sender`'s backlog: writes always, others once no rendezvous
// write from that sender is pending. Called from poll(), outside UCX callbacks.
void UcxTransport::drain(int sender) {
  Inbound& in = inbound_[static_cast<size_t>(sender)];
  while (!in.backlog.empty()) {
    Held& x = in.backlog.front();
    if (must_wait(x.h, in)) return;
    Held cur = std::move(x);
    in.backlog.pop_front();
    --backlog_count_;
    if (cur.desc) {
      void* desc = cur.desc;
      cur.desc = nullptr;  // receive_write takes it
      receive_write(cur.h, desc, cur.rndv_len, /*in_callback=*/false);
    } else {
      apply(cur.h, cur.payload.data(), cur.payload.size());
    }
  }
}

void UcxTransport::drain_backlogs() {
  if (backlog_count_ == 0) return;
  for (int s = 0; s < nranks_; ++s) {
    if (!inbound_[static_cast<size_t>(s)].backlog.empty()) drain(s);
  }
}

void UcxTransport::reject(const AmRequest& h, uint64_t data_len, const char* why) {
  RWIN_LOG(Warn, Ucx,
           "rwin: ucx am: rank %d: dropped %s from rank %d at address 0x%llx length %llu (%llu data bytes): %s",
           rank_, op_name(static_cast<Op>(h.op)), h.sender, static_cast<unsigned long long>(h.addr),
           static_cast<unsigned long long>(h.len), static_cast<unsigned long long>(data_len), why);
  inbound_[static_cast<size_t>(h.sender)].rejected = true;
}

// Starts the rendezvous receive of a Write straight into the window. Returns whether UCX took
// the descriptor (the handler then returns UCS_INPROGRESS). A dropped descriptor is released
// here unless we are inside the handler, where returning UCS_OK drops it.
bool UcxTransport::receive_write(const AmRequest& h, void* desc, uint64_t length, bool in_callback) {
  if (length != h.len || !registry_->contains(h.addr, h.len)) {
    reject(h, length, length != h.len ? "data length differs from the header" : "outside every window");
    if (!in_callback) ucp_am_data_release(worker_.get(), desc);
    return false;
  }
  // Counted before the call: UCX may run the callback inside it (a failed endpoint's receive is
  // purged at once) and still return the request; the callback then settles the count.
  auto* ctx = new RecvCtx{this, h.sender, h.addr, h.len};
  recvs_.push_back(ctx);
  ++inbound_[static_cast<size_t>(h.sender)].rndv_pending;
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.cb.recv_am = &UcxTransport::on_write_data;
  rp.user_data = ctx;
  ctx->posting = true;
  ucs_status_ptr_t req = ucp_am_recv_data_nbx(worker_.get(), desc, reinterpret_cast<void*>(h.addr), length, &rp);
  ctx->posting = false;
  if (ctx->finished) {
    delete ctx;
  } else if (req == nullptr) {
    write_landed(ctx, UCS_OK);
  } else if (UCS_PTR_IS_ERR(req)) {
    write_landed(ctx, UCS_PTR_STATUS(req));
  }
  return true;
}

// A rendezvous write's data landed (or failed): uncount it; frees `ctx` unless it is still
// being posted (receive_write frees it then).
void UcxTransport::write_landed(RecvCtx* ctx, ucs_status_t status) {
  std::erase(recvs_, ctx);
  Inbound& in = inbound_[static_cast<size_t>(ctx->sender)];
  --in.rndv_pending;
  if (status != UCS_OK) write_data_failed(ctx->sender, ctx->addr, ctx->len, status);
  if (!in.backlog.empty()) am_work_ = true;  // poll() drains what may go now
  if (ctx->posting) {
    ctx->finished = true;
  } else {
    delete ctx;
  }
}

void UcxTransport::on_write_data(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* ctx = static_cast<RecvCtx*>(user_data);
  UcxTransport* self = ctx->self;
  ucp_request_free(request);
  if (self->closing_) return;  // the destructor frees ctx
  self->write_landed(ctx, status);
}

void UcxTransport::write_data_failed(int sender, uint64_t addr, uint64_t len, ucs_status_t status) {
  Peer& peer = peers_[static_cast<size_t>(sender)];
  const std::string e = "ucx(" + tls_ + "): rank " + std::to_string(rank_) + " <- peer " + std::to_string(sender) +
                        ": Write of " + std::to_string(len) + " bytes at address 0x" + hex(addr) +
                        " (rendezvous receive) failed: " + status_text(status);
  RWIN_LOG(Warn, Ucx, "rwin: %s", e.c_str());
  if (peer.error.empty()) peer.error = e;
  peer_failed_ = true;
  am_work_ = true;
}

// Applies an in-turn, non-rendezvous request.
void UcxTransport::apply(const AmRequest& h, const void* data, size_t length) {
  const Op op = static_cast<Op>(h.op);
  Inbound& in = inbound_[static_cast<size_t>(h.sender)];
  switch (op) {
    case Op::Write:
      if (length != h.len) return reject(h, length, "data length differs from the header");
      if (!registry_->contains(h.addr, h.len)) return reject(h, length, "outside every window");
      if (length > 0) std::memcpy(reinterpret_cast<void*>(h.addr), data, length);
      return;
    case Op::Read:
      if (!registry_->contains(h.addr, h.len)) {
        reject(h, length, "outside every window");
        return queue_reply(h, AmStatus::Rejected, 0, nullptr, 0);
      }
      return queue_reply(h, AmStatus::Ok, 0, reinterpret_cast<const void*>(h.addr), h.len);
    case Op::Flush: {
      const AmStatus st = in.rejected ? AmStatus::Rejected : AmStatus::Ok;
      in.rejected = false;
      return queue_reply(h, st, 0, nullptr, 0);
    }
    case Op::Accumulate:  // ucx_am::well_formed drops it first (max_add_bytes is 0 here)
      return reject(h, length, "accumulate is not a UCX am request");
    case Op::AtomicAdd:
    case Op::FetchAdd:
    case Op::Swap:
    case Op::CompareSwap:
      break;
  }
  if (h.len != 8 || h.addr % 8 != 0 || !registry_->contains(h.addr, 8)) {
    reject(h, length, h.addr % 8 != 0 ? "atomic address not 8-byte aligned" : "outside every window");
    if (op != Op::AtomicAdd) queue_reply(h, AmStatus::Rejected, 0, nullptr, 0);
    return;
  }
  std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(h.addr));
  uint64_t old = 0;
  switch (op) {
    case Op::AtomicAdd:
      word.fetch_add(h.operand);
      return;
    case Op::FetchAdd:
      old = word.fetch_add(h.operand);
      break;
    case Op::Swap:
      old = word.exchange(h.operand);
      break;
    default: {  // CompareSwap
      old = h.compare;
      word.compare_exchange_strong(old, h.operand);
      break;
    }
  }
  queue_reply(h, AmStatus::Ok, old, nullptr, 0);
}

void UcxTransport::queue_reply(const AmRequest& h, AmStatus st, uint64_t value, const void* data, size_t len) {
  auto* r = new OutReply;
  r->self = this;
  r->to = h.sender;
  r->hdr.op = h.op;
  r->hdr.status = static_cast<uint8_t>(st);
  r->hdr.sender = sender_id(peers_[static_cast<size_t>(h.sender)]);
  r->hdr.token = h.token;
  r->hdr.value = value;
  r->data = data;
  r->len = len;
  replies_.push_back(r);
  am_work_ = true;
}

// Sends queued replies (outside UCX callbacks). Keeps those UCX cannot take yet for next poll().
void UcxTransport::send_replies() {
  while (!replies_.empty()) {
    OutReply* r = replies_.front();
    Peer& peer = peers_[static_cast<size_t>(r->to)];
    if (!peer.error.empty() || !peer.ep) {  // nobody to answer
      replies_.pop_front();
      delete r;
      continue;
    }
    if (r->data && !registry_->contains(reinterpret_cast<uint64_t>(r->data), r->len)) {
      // The window went away between the request and now: answer, but send nothing from it.
      r->hdr.status = static_cast<uint8_t>(AmStatus::Rejected);
      r->data = nullptr;
      r->len = 0;
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &UcxTransport::on_reply_sent;
    param.user_data = r;
    param.flags = r->len <= eager_max_ ? UCP_AM_SEND_FLAG_EAGER : 0;
    ucs_status_ptr_t req = ucp_am_send_nbx(peer.ep, kAmReplyId, &r->hdr, sizeof(AmReply), r->data, r->len, &param);
    if (UCS_PTR_IS_ERR(req) && UCS_PTR_STATUS(req) == UCS_ERR_NO_RESOURCE) return;  // retry at next poll()
    replies_.pop_front();
    if (req == nullptr) {
      delete r;
    } else if (UCS_PTR_IS_ERR(req)) {
      reply_failed(r, UCS_PTR_STATUS(req));
      delete r;
    } else {
      replies_sent_.push_back(r);
    }
  }
}

void UcxTransport::on_reply_sent(void* request, ucs_status_t status, void* user_data) {
  auto* r = static_cast<OutReply*>(user_data);
  UcxTransport* self = r->self;
  ucp_request_free(request);
  if (self->closing_) return;  // the destructor frees r
  auto& v = self->replies_sent_;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == r) {
      v[i] = v.back();
      v.pop_back();
      break;
    }
  }
  if (status != UCS_OK) self->reply_failed(r, status);
  delete r;
}

void UcxTransport::reply_failed(const OutReply* r, ucs_status_t status) {
  Peer& peer = peers_[static_cast<size_t>(r->to)];
  const std::string e = "ucx(" + tls_ + "): rank " + std::to_string(rank_) + " -> peer " + std::to_string(r->to) +
                        ": reply to " + op_name(static_cast<Op>(r->hdr.op)) + " of " + std::to_string(r->len) +
                        " bytes failed: " + status_text(status);
  RWIN_LOG(Warn, Ucx, "rwin: %s", e.c_str());
  if (peer.error.empty()) peer.error = e;
  peer_failed_ = true;
  am_work_ = true;
}

}  // namespace rwin::transport::ucx

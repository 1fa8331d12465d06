// The data path: post() stages work requests per peer, poll() hands them to the device as chains
// and turns work completions into Completions. Never throws, never blocks.
//
// Selective signalling. post() builds WRs into a per-peer chain; the chain goes to ibv_post_send
// when it reaches kChain WRs, and poll() posts whatever is staged. Only the last WR of every chain
// is signaled. An RC send queue completes its WRs in order, so when a signaled WC arrives every
// earlier WR of that QP has completed too: poll() then reports the whole FIFO prefix up to it.
// Because every chain ends signaled, no WR waits for a signal that never comes.
//
// Flow control. A peer's FIFO (staged + posted, not yet completed) never exceeds the send queue
// depth: post() returns Busy instead. The CQ has one entry per send-queue slot of every peer, and
// each WC (signaled success, error, or flush after an error) belongs to one outstanding WR, so the
// CQ cannot overflow.
//
// Flush is a zero-length, signaled RDMA READ. Its completion means every earlier WR on the QP has
// completed (in-order completion). Completion of an RDMA WRITE alone only says the responder
// acknowledged it; a READ response, however, is produced by the responder only after it executed
// every earlier request on that QP (requests execute in order, and a READ may not pass an earlier
// WRITE at the responder: IBA vol. 1, 9.5 "Transaction ordering"), so after the READ completes the
// earlier writes are placed in target memory. A zero-length RDMA request carries no data, so the
// responder does not validate its R_Key or address (IBA vol. 1, chapter 9.4; rxe checks this in
// check_rkey()): Flush needs no key of the peer's and sends rkey 0, address 0.
//
// Swap. IB defines only FETCH_AND_ADD and CMP_AND_SWP, so Swap is a compare-and-swap loop run by
// poll(): CAS(expect = 0, store = value); if the returned old value differs, CAS again expecting
// that value, until a CAS succeeds. The successful CAS replaced exactly the value it returned, so
// the emulation is atomic (linearisable at that CAS) and lock-free (a CAS fails only because
// another update succeeded). Its result lands in the caller's `local`. While a Swap is in flight
// post() returns Busy for that peer, so later work cannot overtake it (a native atomic could not
// be overtaken either). capabilities().native_set is false.
//
// Failure. The first error WC of a QP (or a work request that cannot be valid, or a failed
// ibv_post_send) makes that peer failed: the message is stored, the QP is moved to ERR, every
// outstanding work of the peer completes as failed at once, and later WCs of that QP (flush
// errors) are ignored. WRs before the failing one completed successfully (in-order completion)
// and are reported as such. post() to a failed peer returns PeerFailed.
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "transport/verbs/verbs_transport_impl.h"

namespace rwin::transport::verbs {
namespace {

// WRs per ibv_post_send chain (one signaled WR each): one doorbell per 16 WRs, and a CQ entry per
// 16 WRs instead of one each.
constexpr size_t kChain = 16;
constexpr int kPollBatch = 16;

uint64_t make_wr_id(int peer, uint32_t seq) {
  return (uint64_t{static_cast<uint32_t>(peer)} << 32) | seq;
}
int wr_peer(uint64_t wr_id) {
  return static_cast<int>(wr_id >> 32);
}
uint32_t wr_seq(uint64_t wr_id) {
  return static_cast<uint32_t>(wr_id);
}
// Sequence numbers wrap; outstanding ones are never more than sq_depth apart.
bool seq_before(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) < 0;
}

const char* verb_name(Op op) {
  switch (op) {
    case Op::Write:
      return "rdma write";
    case Op::Read:
      return "rdma read";
    case Op::AtomicAdd:
      return "atomic add (fetch-and-add)";
    case Op::FetchAdd:
      return "atomic fetch-add";
    case Op::CompareSwap:
      return "atomic compare-swap";
    case Op::Swap:
      return "swap (compare-swap loop)";
    case Op::Flush:
      return "flush (zero-length rdma read)";
  }
  return "unknown op";
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

bool is_atomic(Op op) {
  return op == Op::AtomicAdd || op == Op::FetchAdd || op == Op::CompareSwap || op == Op::Swap;
}

}  // namespace

std::string VerbsTransport::op_text(int peer, const Pending& p) const {
  std::string s = who(peer);
  if (peers_[peer].qp) s += " qp " + hex(peers_[peer].qp->qp_num);
  s += ": ";
  s += verb_name(p.op);
  if (p.op != Op::Flush) s += " of " + std::to_string(p.bytes) + " bytes at remote " + hex(p.remote_addr);
  return s;
}

std::string VerbsTransport::check_work(const Work& w, uint32_t& lkey, uint32_t& rkey) const {
  if (w.op == Op::Flush) return {};
  if (static_cast<unsigned>(w.op) > static_cast<unsigned>(Op::Flush)) return "invalid op value";
  const auto* key = dynamic_cast<const VerbsRemoteKey*>(w.rkey);
  if (!key) return w.rkey ? "remote key is not a verbs key" : "no remote key";
  if (key->peer() != w.peer) return "remote key belongs to peer " + std::to_string(key->peer());
  rkey = key->rkey();
  const size_t n = is_atomic(w.op) ? 8 : w.bytes;
  if (!is_atomic(w.op) && n > dev_info_.port_attr.max_msg_sz) {
    return "length exceeds the port's max message size " + std::to_string(dev_info_.port_attr.max_msg_sz);
  }
  // An atomic may act on the 8-byte word holding the region's last bytes even when the length is
  // not a multiple of 8 (the core updates a 32-bit lane through the word around it): regions are
  // page aligned and registered in whole pages (VerbsMemoryRegion), so that word is registered.
  const bool in_range = is_atomic(w.op) ? key->contains_word(w.remote_addr) : key->contains(w.remote_addr, n);
  if (!in_range) {
    return "remote range outside the peer's region [" + hex(key->base()) + ", +" + std::to_string(key->bytes()) + ")";
  }
  // IB atomics act on naturally aligned 8-byte words (a misaligned one is NAKed as an invalid
  // request and kills the QP), and write their result to an aligned local word.
  if (is_atomic(w.op) && w.remote_addr % 8 != 0) return "remote address not 8-byte aligned";
  if (w.op == Op::AtomicAdd) {
    lkey = scratch_->lkey();
    return {};
  }
  if (n == 0) return {};
  const auto* mr = dynamic_cast<const VerbsMemoryRegion*>(w.local_mr);
  if (!mr) return w.local_mr ? "local region is not a verbs region" : "no local region (verbs needs its lkey)";
  if (!mr->contains(w.local, n)) return "local buffer outside its region";
  if (is_atomic(w.op) && reinterpret_cast<uintptr_t>(w.local) % 8 != 0) return "local result slot not 8-byte aligned";
  lkey = mr->lkey();
  return {};
}

void VerbsTransport::stage(int peer, const Pending& p, const ibv_send_wr& wr, const ibv_sge* sge) {
  Peer& pr = peers_[peer];
  Pending q = p;
  q.seq = pr.next_seq++;
  Staged s;
  s.wr = wr;
  s.wr.wr_id = make_wr_id(peer, q.seq);
  s.wr.num_sge = sge ? 1 : 0;
  if (sge) s.sge = *sge;
  pr.pending.push_back(q);
  pr.staged.push_back(s);
}

void VerbsTransport::flush_staged(int peer) {
  Peer& pr = peers_[peer];
  auto& st = pr.staged;
  if (st.empty()) return;
  for (size_t i = 0; i < st.size(); ++i) {
    st[i].wr.sg_list = st[i].wr.num_sge ? &st[i].sge : nullptr;
    st[i].wr.next = i + 1 < st.size() ? &st[i + 1].wr : nullptr;
  }
  st.back().wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(pr.qp.get(), &st.front().wr, &bad);
  size_t posted = st.size();
  for (size_t i = 0; bad && i < st.size(); ++i) {
    if (&st[i].wr == bad) posted = i;
  }
  st.clear();
  if (rc != 0) {
    // Should not happen (we never exceed the send queue); the chain's tail is not posted and the
    // head has no signaled WR, so the peer cannot continue in a defined way.
    fail_peer(peer, who(peer) + " qp " + hex(pr.qp->qp_num) + ": ibv_post_send failed after " + std::to_string(posted) +
                        " work requests: " + std::strerror(rc));
  }
}

PostResult VerbsTransport::post(const Work& w) {
  if (w.peer < 0 || w.peer >= npeers()) {
    ready_.push_back({w.cookie, false,
                      self_ + ": " + describe_ + ": " + verb_name(w.op) + " to peer " + std::to_string(w.peer) +
                          ": no such peer (" +
                          (cfg_.dynamic_peers ? std::to_string(npeers()) + " run-time peers added"
                                              : "job has " + std::to_string(cfg_.nranks) + " ranks") +
                          ")"});
    return PostResult::Ok;
  }
  Peer& pr = peers_[w.peer];
  if (!pr.error.empty()) return PostResult::PeerFailed;
  if (!pr.connected) {
    ready_.push_back({w.cookie, false,
                      who(w.peer) + ": " + verb_name(w.op) + " posted before " +
                          (cfg_.dynamic_peers ? "connect_peer()" : "connect()")});
    return PostResult::Ok;
  }
  if (pr.swap.active || pr.pending.size() >= sq_depth_) return PostResult::Busy;

  Pending p;
  p.cookie = w.cookie;
  p.op = w.op;
  p.bytes = is_atomic(w.op) ? 8 : (w.op == Op::Flush ? 0 : w.bytes);
  p.remote_addr = w.remote_addr;
  uint32_t lkey = 0, rkey = 0;
  if (const std::string bad = check_work(w, lkey, rkey); !bad.empty()) {
    // Accepted, so it yields a Completion: a failed one. A device would turn most of these into a
    // local or remote access error that moves the QP to ERR anyway; failing here names the cause.
    const std::string msg = op_text(w.peer, p) + ": invalid work request: " + bad;
    fail_peer(w.peer, msg);
    ready_.push_back({w.cookie, false, msg});
    return PostResult::Ok;
  }

  ibv_send_wr wr{};
  ibv_sge sge{};
  const ibv_sge* sgp = nullptr;
  switch (w.op) {
    case Op::Write:
    case Op::Read:
      wr.opcode = w.op == Op::Write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = w.remote_addr;
      wr.wr.rdma.rkey = rkey;
      if (w.bytes > 0) {
        sge = {reinterpret_cast<uint64_t>(w.local), static_cast<uint32_t>(w.bytes), lkey};
        sgp = &sge;
      }
      if (w.op == Op::Write && w.bytes > 0 && w.bytes <= max_inline_) wr.send_flags |= IBV_SEND_INLINE;
      break;
    case Op::AtomicAdd:
    case Op::FetchAdd:
      wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      wr.wr.atomic.remote_addr = w.remote_addr;
      wr.wr.atomic.rkey = rkey;
      wr.wr.atomic.compare_add = w.operand;
      // AtomicAdd's old value is not wanted, but the device always writes one: into the scratch word.
      sge = {w.op == Op::AtomicAdd ? reinterpret_cast<uint64_t>(scratch_->addr()) : reinterpret_cast<uint64_t>(w.local),
             8, lkey};
      sgp = &sge;
      break;
    case Op::CompareSwap:
      wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
      wr.wr.atomic.remote_addr = w.remote_addr;
      wr.wr.atomic.rkey = rkey;
      wr.wr.atomic.compare_add = w.compare;
      wr.wr.atomic.swap = w.operand;
      sge = {reinterpret_cast<uint64_t>(w.local), 8, lkey};
      sgp = &sge;
      break;
    case Op::Swap: {
      SwapState& s = pr.swap;
      s = {};
      s.active = true;
      s.cookie = w.cookie;
      s.local = static_cast<uint64_t*>(w.local);
      s.lkey = lkey;
      s.remote_addr = w.remote_addr;
      s.rkey = rkey;
      s.value = w.operand;
      s.guess = 0;  // zero is the common initial state of a word; any guess is correct, just slower
      stage_swap_cas(w.peer);
      flush_staged(w.peer);  // the loop's first CAS goes out now, signaled: we need its result
      return PostResult::Ok;
    }
    case Op::Flush:
      wr.opcode = IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = 0;
      wr.wr.rdma.rkey = 0;
      break;
  }
  stage(w.peer, p, wr, sgp);
  if (pr.staged.size() >= kChain) flush_staged(w.peer);
  return PostResult::Ok;
}

void VerbsTransport::stage_swap_cas(int peer) {
  SwapState& s = peers_[peer].swap;
  ++s.attempts;
  Pending p;
  p.cookie = s.cookie;
  p.op = Op::Swap;
  p.bytes = 8;
  p.remote_addr = s.remote_addr;
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  wr.wr.atomic.remote_addr = s.remote_addr;
  wr.wr.atomic.rkey = s.rkey;
  wr.wr.atomic.compare_add = s.guess;
  wr.wr.atomic.swap = s.value;
  const ibv_sge sge{reinterpret_cast<uint64_t>(s.local), 8, s.lkey};
  stage(peer, p, wr, &sge);
}

void VerbsTransport::on_success(int peer, uint32_t seq) {
  Peer& pr = peers_[peer];
  if (!pr.error.empty()) return;  // everything of this peer was already reported as failed
  while (!pr.pending.empty() && !seq_before(seq, pr.pending.front().seq)) {
    const Pending p = pr.pending.front();
    pr.pending.pop_front();
    if (p.op == Op::Swap && pr.swap.active) {
      // The CAS wrote the word's old value into the caller's slot (device DMA, complete now that
      // its WC has been polled).
      const uint64_t old = *static_cast<volatile uint64_t*>(pr.swap.local);
      if (old == pr.swap.guess) {
        ready_.push_back({p.cookie, true, {}});
        pr.swap.active = false;
      } else {
        pr.swap.guess = old;  // someone else's value: expect it and try again
        stage_swap_cas(peer);
      }
      continue;
    }
    ready_.push_back({p.cookie, true, {}});
  }
}

void VerbsTransport::on_error(int peer, const ibv_wc& wc) {
  Peer& pr = peers_[peer];
  if (!pr.error.empty()) return;  // a flush error after the first failure: already reported
  const uint32_t seq = wr_seq(wc.wr_id);
  // In-order completion: the WRs before the failing one completed successfully.
  while (!pr.pending.empty() && seq_before(pr.pending.front().seq, seq)) {
    ready_.push_back({pr.pending.front().cookie, true, {}});
    pr.pending.pop_front();
  }
  Pending failing;
  if (!pr.pending.empty() && pr.pending.front().seq == seq)
    failing = pr.pending.front();
  else
    failing.op = Op::Flush;  // unknown WR: name no range rather than a wrong one
  char tail[96];
  std::snprintf(tail, sizeof tail, " (status %d, vendor_err 0x%x)", static_cast<int>(wc.status), wc.vendor_err);
  fail_peer(peer, op_text(peer, failing) + " failed: " + ibv_wc_status_str(wc.status) + tail);
}

void VerbsTransport::fail_peer(int peer, const std::string& msg) noexcept {
  if (peer < 0 || peer >= npeers()) return;
  Peer& pr = peers_[peer];
  if (pr.error.empty()) pr.error = msg;
  if (pr.qp) {
    // Stop the device working on this QP: its unexecuted WRs are flushed (WCs ignored above), so
    // no buffer we now report as done is touched later.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(pr.qp.get(), &a, IBV_QP_STATE);
  }
  bool first = true;
  for (const Pending& p : pr.pending) {
    ready_.push_back({p.cookie, false, first ? msg : op_text(peer, p) + " abandoned, peer failed: " + msg});
    first = false;
  }
  pr.pending.clear();
  pr.staged.clear();
  pr.swap.active = false;
  if (cfg_.dynamic_peers && pr.qp) {
    // A run-time peer is gone for good (its index is never reused): destroy the QP, so nothing
    // of it stays on the device and its send-queue share of the CQ can go to later peers once
    // poll() has drained the WCs it left there.
    pr.qp.reset();
    --live_peers_;
    ++retired_undrained_;
  }
}

void VerbsTransport::quiesce(bool /*graceful: an RC QP moved to error needs no goodbye*/) noexcept {
  for (int p = 0; p < npeers(); ++p) {
    fail_peer(p, who(p) + ": transport closed (context shutting down)");
  }
}

void VerbsTransport::poll(std::vector<Completion>& out) {
  for (int p = 0; p < npeers(); ++p) {
    if (peers_[p].error.empty()) flush_staged(p);
  }
  if (live_peers_ > 0 || retired_undrained_ > 0) {
    ibv_wc wc[kPollBatch];
    // Bounded: at most one pass over everything the CQ can hold, so poll() never spins.
    const int max_rounds = cq_cqe_ / kPollBatch + 1;
    for (int round = 0; round < max_rounds; ++round) {
      // QPs destroyed before this ibv_poll_cq call add no WCs any more: once it finds the CQ
      // empty, theirs are all consumed (a peer failed while handling this batch is not).
      const size_t retired_before = retired_undrained_;
      const int n = ibv_poll_cq(cq_.get(), kPollBatch, wc);
      if (n < 0) {
        for (int p = 0; p < npeers(); ++p) {
          if (peers_[p].error.empty()) {
            fail_peer(p, who(p) + ": ibv_poll_cq failed (returned " + std::to_string(n) + ")");
          }
        }
        break;
      }
      for (int i = 0; i < n; ++i) {
        const int peer = wr_peer(wc[i].wr_id);
        if (peer < 0 || peer >= npeers()) continue;
        if (wc[i].status == IBV_WC_SUCCESS)
          on_success(peer, wr_seq(wc[i].wr_id));
        else
          on_error(peer, wc[i]);
      }
      if (n < kPollBatch) {
        retired_undrained_ -= retired_before;
        break;
      }
    }
    for (int p = 0; p < npeers(); ++p) {
      if (peers_[p].error.empty()) flush_staged(p);  // Swap retries staged by on_success()
    }
  }
  out.insert(out.end(), std::make_move_iterator(ready_.begin()), std::make_move_iterator(ready_.end()));
  ready_.clear();
}

std::string VerbsTransport::peer_error(int peer) const {
  if (peer < 0 || peer >= npeers()) return "no such peer " + std::to_string(peer);
  return peers_[peer].error;
}

}  // namespace rwin::transport::verbs

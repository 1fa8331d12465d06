// The data path: post() stages work requests per peer, poll() hands them to the device as chains
// and turns work completions into Completions. Never throws, never blocks.
//
// Selective signalling and batching, as perftest drives a NIC. post() builds WRs into a per-peer
// chain; the chain goes to ibv_post_send (one doorbell) when it reaches kChain WRs, when post()
// would otherwise report Busy, or at poll() once it holds a WR somebody waits for. Only the last
// WR of every chain is signaled. An RC send queue completes its WRs in order, so when a signaled
// WC arrives every earlier WR of that QP has completed too: poll() then reports the whole FIFO
// prefix up to it. Because every chain ends signaled, no WR waits for a signal that never comes.
// A Write of at most max_inline_ bytes is copied into the peer's bounce slot and completes at
// post() (its source is reusable, all a Write's completion promises; transport.h lets such a
// Write stay staged until the next non-Write op or Flush to the peer): a loop of small puts goes
// out kChain WRs per doorbell with one signaled WR, and a blocking small put returns at once.
// poll() visits only peers with staged work (dirty_), never every peer.
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
// earlier writes are placed in target memory. A zero-length RDMA request carries no data, and the
// IBA lets its R_Key and address be anything (C9-88), but Flush still names a real registered
// word of the peer's (QpAddress::flush_addr/flush_rkey, exchanged at connect): rxe replays a
// retransmitted READ by looking its R_Key up again, and rkey 0 then fails as an R_Key violation
// that moves the responder's QP to ERR, seen here as a flush with no failed WR of our own
// (tests/rxe/DEFECTS.md has the history).
//
// Swap. IB defines only FETCH_AND_ADD and CMP_AND_SWP, so Swap is a compare-and-swap loop run by
// poll(): CAS(expect = 0, store = value); if the returned old value differs, CAS again expecting
// that value, until a CAS succeeds. The successful CAS replaced exactly the value it returned, so
// the emulation is atomic (linearisable at that CAS) and lock-free (a CAS fails only because
// another update succeeded). Every CAS of the loop returns into the peer's own result slot
// (result_slot(): one registered word per peer that no other WR writes), so the loop never
// mistakes another peer's returned value for its own; the caller's `local` gets the final old
// value when the Swap completes (the core passes one scratch word for every peer). While a Swap is
// in flight post() returns Busy for that peer, so later work cannot overtake it (a native atomic
// could not be overtaken either). capabilities().native_set is false.
//
// Striping (RWIN_VERBS_QPS_PER_PEER = K > 1, collective peers). Each peer has K RC QPs ("lanes")
// on the device. Writes and Reads of at least RWIN_VERBS_STRIPE_MIN bytes go round-robin over all
// K (the core's pipeline keeps several chunks in flight, so a large put is spread over every QP, as
// mori and NCCL's net_ib do; on RoCE each QP is its own UDP source port, hence its own ECMP path);
// everything else, atomics, Swap loops and Flush included, goes on lane 0. An RC QP orders only
// its own requests, so before an atomic or Flush goes out on lane 0, every other lane that carried
// a Write since its last fence gets a zero-length READ (a fence read), and post() answers Busy
// until those complete: a READ's response leaves the responder after every earlier request of its
// QP executed (see Flush below), so the striped Writes are placed before the atomic is executed.
// The fence costs one round trip, only after striped Writes; small puts and notify never pay it.
// Run-time peers (agents) use one QP each. The lanes of a peer fail together.
//
// Failure. The first error WC of a QP (or a work request that cannot be valid, a failed
// ibv_post_send, or an asynchronous QP/port/CQ event) makes that peer failed: the message is
// stored and the QP is moved to ERR. WRs never handed to the device complete as failed at once.
// Posted ones complete as failed only when the device has returned their completions (it flushes
// every outstanding WR of a QP in ERR, signaled or not, in order), as the kernel's ib_drain_qp
// does: until then the device may still read or write their buffers. A drain that does not end
// within kDrainLimit destroys the QP (ibv_destroy_qp returns once the device no longer uses it).
// WRs before the failing one completed successfully (in-order completion) and are reported as
// such. post() to a failed peer returns PeerFailed. When the first error WC of a QP is a flush
// (the QP entered ERR without a failed WR of its own: a responder-side error, an async event),
// the message says so and names the async event when the device reported one.
#include <fcntl.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "transport/verbs/verbs_transport_impl.h"

namespace rwin::transport::verbs {
namespace {

// WRs per ibv_post_send chain (one signaled WR each): one doorbell per 16 WRs, and a CQ entry per
// 16 WRs instead of one each.
constexpr size_t kChain = 16;
constexpr int kPollBatch = 16;
// How long a failed peer's posted WRs may take to come back flushed before its QP is destroyed.
constexpr auto kDrainLimit = std::chrono::seconds(5);

// wr_id: peer (24 bits) | lane (8 bits) | per-lane sequence number (32 bits).
uint64_t make_wr_id(int peer, int lane, uint32_t seq) {
  return (uint64_t{static_cast<uint32_t>(peer)} << 40) | (uint64_t{static_cast<uint8_t>(lane)} << 32) | seq;
}
int wr_peer(uint64_t wr_id) {
  return static_cast<int>(wr_id >> 40);
}
int wr_lane(uint64_t wr_id) {
  return static_cast<int>((wr_id >> 32) & 0xff);
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
    case Op::Accumulate:
      return "accumulate (not a verb)";
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

std::string VerbsTransport::op_text(int peer, int lane, const Pending& p) const {
  std::string s = who(peer);
  const Lane& ln = peers_[peer].lanes[static_cast<size_t>(lane)];
  if (ln.qp) s += " qp " + hex(ln.qp->qp_num);
  if (peers_[peer].lanes.size() > 1) {
    s += " (lane " + std::to_string(lane) + (rails_.size() > 1 ? " on " + rails_[ln.rail].info.name : std::string()) + ")";
  }
  s += ": ";
  s += p.internal ? "fence (zero-length rdma read)" : verb_name(p.op);
  if (p.op != Op::Flush) s += " of " + std::to_string(p.bytes) + " bytes at remote " + hex(p.remote_addr);
  return s;
}

std::string VerbsTransport::check_work(const Work& w, const Lane& ln, uint32_t& lkey, uint32_t& rkey) const {
  if (w.op == Op::Flush) return {};
  if (static_cast<unsigned>(w.op) > static_cast<unsigned>(Op::Flush)) return "invalid op value";
  const auto* key = dynamic_cast<const VerbsRemoteKey*>(w.rkey);
  if (!key) return w.rkey ? "remote key is not a verbs key" : "no remote key";
  if (key->peer() != w.peer) return "remote key belongs to peer " + std::to_string(key->peer());
  if (!key->rkey(ln.remote_rail, rkey)) {
    return "the peer's key has no rkey for its device " + std::to_string(ln.remote_rail) +
           " (a key packed by a transport with fewer devices than this queue pair's peer end)";
  }
  const size_t n = is_atomic(w.op) ? 8 : w.bytes;
  if (!is_atomic(w.op) && n > max_msg_) {
    return "length exceeds the port's max message size " + std::to_string(max_msg_);
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
    lkey = scratch_->lkey(ln.rail);
    return {};
  }
  if (n == 0) return {};
  const auto* mr = dynamic_cast<const VerbsMemoryRegion*>(w.local_mr);
  if (!mr) return w.local_mr ? "local region is not a verbs region" : "no local region (verbs needs its lkey)";
  if (!mr->contains(w.local, n)) return "local buffer outside its region";
  if (is_atomic(w.op) && reinterpret_cast<uintptr_t>(w.local) % 8 != 0) return "local result slot not 8-byte aligned";
  if (mr->rails() != rails_.size()) return "local region registered on another transport's devices";
  lkey = mr->lkey(ln.rail);
  return {};
}

void VerbsTransport::stage(int peer, int lane, const Pending& p, const ibv_send_wr& wr, const ibv_sge* sge) {
  Lane& ln = peers_[peer].lanes[static_cast<size_t>(lane)];
  if (!p.early) ln.needs_post = true;
  if (!ln.dirty) {
    ln.dirty = true;
    dirty_.push_back({peer, lane});
  }
  Pending q = p;
  q.seq = ln.next_seq++;
  Staged s;
  s.wr = wr;
  s.wr.wr_id = make_wr_id(peer, lane, q.seq);
  s.wr.num_sge = sge ? 1 : 0;
  if (sge) s.sge = *sge;
  ln.pending.push_back(q);
  ln.staged.push_back(s);
}

void VerbsTransport::flush_staged(int peer, int lane) {
  Lane& ln = peers_[peer].lanes[static_cast<size_t>(lane)];
  auto& st = ln.staged;
  if (st.empty()) return;
  for (size_t i = 0; i < st.size(); ++i) {
    st[i].wr.sg_list = st[i].wr.num_sge ? &st[i].sge : nullptr;
    st[i].wr.next = i + 1 < st.size() ? &st[i + 1].wr : nullptr;
  }
  st.back().wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(ln.qp.get(), &st.front().wr, &bad);
  ++counters_.doorbells;
  size_t posted = st.size();
  for (size_t i = 0; rc != 0 && bad && i < st.size(); ++i) {
    if (&st[i].wr == bad) posted = i;
  }
  ln.needs_post = false;
  if (rc == 0) {
    counters_.wrs += st.size();
    ++counters_.signaled;
    for (const Staged& x : st) counters_.inline_wrs += (x.wr.send_flags & IBV_SEND_INLINE) != 0;
    st.clear();
    return;
  }
  // Should not happen (we never exceed the send queue). The unposted tail stays staged, so
  // fail_peer() fails it at once and drains only what the device has.
  if (rc != 0 && bad == nullptr) posted = 0;
  st.erase(st.begin(), st.begin() + static_cast<std::ptrdiff_t>(posted));
  fail_peer(peer, who(peer) + " qp " + hex(ln.qp->qp_num) + ": ibv_post_send failed after " + std::to_string(posted) +
                      " work requests: " + std::strerror(rc));
}

bool VerbsTransport::start_fence(int peer) {
  Peer& pr = peers_[peer];
  bool any = false;
  for (size_t l = 1; l < pr.lanes.size() && pr.error.empty(); ++l) {
    Lane& ln = pr.lanes[l];
    if (!ln.unfenced) continue;
    any = true;
    const int lane = static_cast<int>(l);
    if (ln.pending.size() >= sq_depth_) {  // no slot for the read: the next post() tries again
      flush_staged(peer, lane);
      continue;
    }
    Pending f;
    f.op = Op::Flush;
    f.internal = true;
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = ln.flush_addr;
    wr.wr.rdma.rkey = ln.flush_rkey;
    stage(peer, lane, f, wr, nullptr);
    ln.unfenced = false;
    ++pr.fencing;
    ++counters_.fence_reads;
    flush_staged(peer, lane);  // signaled (last of its chain): its completion ends the fence
  }
  return any;
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
  if (w.op == Op::Accumulate) {  // capabilities().max_add_bytes is 0: the core never posts one
    ready_.push_back({w.cookie, false, who(w.peer) + ": accumulate: the adapter cannot apply put(Add)"});
    return PostResult::Ok;
  }
  if (!pr.connected) {
    ready_.push_back({w.cookie, false,
                      who(w.peer) + ": " + verb_name(w.op) + " posted before " +
                          (cfg_.dynamic_peers ? "connect_peer()" : "connect()")});
    return PostResult::Ok;
  }
  // Later work waits for a Swap loop or a fence in flight: nothing overtakes them.
  if (pr.swap.active || pr.fencing > 0) return PostResult::Busy;
  const size_t nlanes = pr.lanes.size();
  // An atomic or Flush goes on lane 0 and must land after every Write before it: Writes striped
  // over the other lanes are fenced first (a zero-length READ per lane, completed before it posts).
  if (nlanes > 1 && (is_atomic(w.op) || w.op == Op::Flush) && start_fence(w.peer)) {
    return pr.error.empty() ? PostResult::Busy : PostResult::PeerFailed;
  }
  int lane = 0;
  const bool striped = nlanes > 1 && (w.op == Op::Write || w.op == Op::Read) && w.bytes >= cfg_.verbs.stripe_min;
  if (striped) {
    // Round-robin, skipping lanes whose send queue is full (a slow QP gets fewer stripes).
    lane = -1;
    for (size_t k = 0; k < nlanes && lane < 0; ++k) {
      const size_t l = (pr.next_lane + k) % nlanes;
      if (pr.lanes[l].pending.size() < sq_depth_) lane = static_cast<int>(l);
    }
    if (lane < 0) {
      for (size_t l = 0; l < nlanes; ++l) flush_staged(w.peer, static_cast<int>(l));
      return PostResult::Busy;
    }
  }
  Lane& ln = pr.lanes[static_cast<size_t>(lane)];
  if (ln.pending.size() >= sq_depth_) {
    flush_staged(w.peer, lane);  // early-completed Writes may be all that is staged: let them go
    return PostResult::Busy;
  }

  Pending p;
  p.cookie = w.cookie;
  p.op = w.op;
  p.bytes = is_atomic(w.op) ? 8 : (w.op == Op::Flush ? 0 : w.bytes);
  p.remote_addr = w.remote_addr;
  uint32_t lkey = 0, rkey = 0;
  if (const std::string bad = check_work(w, ln, lkey, rkey); !bad.empty()) {
    // Accepted, so it yields a Completion: a failed one. A device would turn most of these into a
    // local or remote access error that moves the QP to ERR anyway; failing here names the cause.
    const std::string msg = op_text(w.peer, lane, p) + ": invalid work request: " + bad;
    fail_peer(w.peer, msg);
    ready_.push_back({w.cookie, false, msg});
    return PostResult::Ok;
  }
  if (striped) pr.next_lane = static_cast<uint32_t>((static_cast<size_t>(lane) + 1) % nlanes);

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
      // Inline (early-completed) Writes only on lane 0: they stay staged until a later op of their
      // lane, and only lane 0 sees every kind of op (a tiny RWIN_VERBS_STRIPE_MIN stripes them not inline).
      if (lane == 0 && w.op == Op::Write && w.bytes > 0 && w.bytes <= max_inline_) {
        wr.send_flags |= IBV_SEND_INLINE;
        if (ln.bounce.empty()) ln.bounce.resize(kChain * max_inline_);
        uint8_t* slot = ln.bounce.data() + ln.staged.size() * max_inline_;  // staged.size() < kChain
        std::memcpy(slot, w.local, w.bytes);
        sge.addr = reinterpret_cast<uint64_t>(slot);
        p.early = true;
        ready_.push_back({w.cookie, true, {}});
      }
      if (lane != 0) {
        ++counters_.striped;
        if (w.op == Op::Write) ln.unfenced = true;
      }
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
      s.user = static_cast<uint64_t*>(w.local);
      s.result = result_slot(w.peer, s.result_lkey);
      s.remote_addr = w.remote_addr;
      s.rkey = rkey;
      s.value = w.operand;
      s.guess = 0;  // zero is the common initial state of a word; any guess is correct, just slower
      stage_swap_cas(w.peer);
      flush_staged(w.peer, 0);  // the loop's first CAS goes out now, signaled: we need its result
      return PostResult::Ok;
    }
    case Op::Flush:
      wr.opcode = IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = ln.flush_addr;
      wr.wr.rdma.rkey = ln.flush_rkey;
      break;
    case Op::Accumulate:  // refused above
      return PostResult::Ok;
  }
  stage(w.peer, lane, p, wr, sgp);
  if (ln.staged.size() >= kChain) flush_staged(w.peer, lane);
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
  const ibv_sge sge{reinterpret_cast<uint64_t>(s.result), 8, s.result_lkey};
  stage(peer, 0, p, wr, &sge);
}

void VerbsTransport::on_success(int peer, int lane, uint32_t seq) {
  Peer& pr = peers_[peer];
  if (!pr.error.empty()) return drained_upto(peer, lane, seq, true);
  Lane& ln = pr.lanes[static_cast<size_t>(lane)];
  while (!ln.pending.empty() && !seq_before(seq, ln.pending.front().seq)) {
    const Pending p = ln.pending.front();
    ln.pending.pop_front();
    if (p.internal) {  // a fence read: every earlier Write of this lane is placed
      if (pr.fencing > 0) --pr.fencing;
      continue;
    }
    if (p.op == Op::Swap && pr.swap.active) {
      // The CAS wrote the word's old value into this peer's own slot (device DMA, complete now
      // that its WC has been polled; no other WR writes that slot).
      const uint64_t old = *static_cast<volatile uint64_t*>(pr.swap.result);
      if (old == pr.swap.guess) {
        if (pr.swap.user) *static_cast<volatile uint64_t*>(pr.swap.user) = old;
        ready_.push_back({p.cookie, true, {}});
        pr.swap.active = false;
      } else {
        pr.swap.guess = old;  // someone else's value: expect it and try again
        stage_swap_cas(peer);
      }
      continue;
    }
    if (!p.early) ready_.push_back({p.cookie, true, {}});
  }
}

void VerbsTransport::on_error(int peer, int lane, const ibv_wc& wc) {
  Peer& pr = peers_[peer];
  Lane& ln = pr.lanes[static_cast<size_t>(lane)];
  const uint32_t seq = wr_seq(wc.wr_id);
  if (wc.status == IBV_WC_WR_FLUSH_ERR && pr.error.empty()) {
    // Flushed with no failed WR of its own: the QP entered ERR for a reason the device may have
    // announced as an async event (read it now, so the message names it).
    read_async_events();
  }
  if (!pr.error.empty()) return drained_upto(peer, lane, seq, false);
  // In-order completion: the WRs of this lane before the failing one completed successfully.
  while (!ln.pending.empty() && seq_before(ln.pending.front().seq, seq)) {
    const Pending& f = ln.pending.front();
    if (!f.early && !f.internal) ready_.push_back({f.cookie, true, {}});
    ln.pending.pop_front();
  }
  Pending failing;
  if (!ln.pending.empty() && ln.pending.front().seq == seq)
    failing = ln.pending.front();
  else
    failing.op = Op::Flush;  // unknown WR: name no range rather than a wrong one
  char tail[96];
  std::snprintf(tail, sizeof tail, " (status %d, vendor_err 0x%x)", static_cast<int>(wc.status), wc.vendor_err);
  std::string msg = op_text(peer, lane, failing) + " failed: " + ibv_wc_status_str(wc.status) + tail;
  if (wc.status == IBV_WC_WR_FLUSH_ERR) {
    msg += ": the queue pair was already in the error state and no work request of it had failed here "
           "(a responder-side error, or the QP was reset; the device reported no async event for it)";
  }
  fail_peer(peer, msg);
  // fail_peer() keeps the posted WRs until their completions return: this one has.
  drained_upto(peer, lane, seq, false);
}

void VerbsTransport::report_failed(int peer, int lane, const Pending& p) {
  // An early Write already completed (its source was reusable); its loss shows as the peer's
  // failure at the next op, as for any Write whose data had not landed. A fence read has no caller.
  if (p.early || p.internal) return;
  Peer& pr = peers_[peer];
  ready_.push_back(
      {p.cookie, false, pr.first_reported ? op_text(peer, lane, p) + " abandoned, peer failed: " + pr.error : pr.error});
  pr.first_reported = true;
}

void VerbsTransport::drained_upto(int peer, int lane, uint32_t seq, bool ok) {
  Peer& pr = peers_[peer];
  Lane& ln = pr.lanes[static_cast<size_t>(lane)];
  while (!ln.pending.empty() && !seq_before(seq, ln.pending.front().seq)) {
    const Pending p = ln.pending.front();
    ln.pending.pop_front();
    // A successful WC: the device completed this WR and every earlier one of the lane before the
    // QP failed (an abandoned Swap loop still failed). After a flush, whether an earlier unsignaled
    // WR had completed is not known here: failed is the safe answer for a peer that failed anyway.
    ++counters_.drained;
    if (ok && p.op != Op::Swap) {
      if (!p.early && !p.internal) ready_.push_back({p.cookie, true, {}});
    } else {
      report_failed(peer, lane, p);
    }
  }
  if (pr.draining && !pr.has_pending()) {
    pr.draining = false;
    --draining_peers_;
  }
}

void VerbsTransport::retire_qp(int peer) noexcept {
  // Once ibv_destroy_qp returns the device no longer touches this QP's buffers. Its WCs already in
  // the CQ still count against the CQ's size until poll() finds the CQ empty.
  for (Lane& ln : peers_[peer].lanes) {
    if (!ln.qp) continue;
    ln.qp.reset();
    --live_qps_;
    ++retired_undrained_;
  }
}

void VerbsTransport::fail_peer(int peer, const std::string& msg) noexcept {
  if (peer < 0 || peer >= npeers()) return;
  Peer& pr = peers_[peer];
  const bool first = pr.error.empty();
  if (first) {
    pr.error = msg;
    // Stop the device working on every QP of the peer: it flushes each one's outstanding WRs, in order.
    for (Lane& ln : pr.lanes) {
      if (!ln.qp) continue;
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      ibv_modify_qp(ln.qp.get(), &a, IBV_QP_STATE);
    }
  }
  pr.swap.active = false;
  pr.fencing = 0;
  // WRs still staged were never handed to the device: they fail now.
  std::vector<std::pair<int, Pending>> never;
  for (size_t l = 0; l < pr.lanes.size(); ++l) {
    Lane& ln = pr.lanes[l];
    const size_t unposted = std::min(ln.staged.size(), ln.pending.size());
    ln.staged.clear();
    for (auto it = ln.pending.end() - static_cast<std::ptrdiff_t>(unposted); it != ln.pending.end(); ++it) {
      never.emplace_back(static_cast<int>(l), *it);
    }
    ln.pending.erase(ln.pending.end() - static_cast<std::ptrdiff_t>(unposted), ln.pending.end());
  }
  // A run-time peer is gone for good (its index is never reused): destroy the QP now, so nothing of
  // it stays on the device and its share of the CQ can go to later peers.
  if (cfg_.dynamic_peers) retire_qp(peer);
  bool any_qp = false;
  for (const Lane& ln : pr.lanes) any_qp = any_qp || ln.qp != nullptr;
  if (!any_qp) {
    for (size_t l = 0; l < pr.lanes.size(); ++l) {
      for (const Pending& p : pr.lanes[l].pending) report_failed(peer, static_cast<int>(l), p);
      pr.lanes[l].pending.clear();
    }
    if (pr.draining) {
      pr.draining = false;
      --draining_peers_;
    }
  } else if (pr.has_pending() && !pr.draining) {
    pr.draining = true;
    pr.drain_deadline = std::chrono::steady_clock::now() + kDrainLimit;
    ++draining_peers_;
  }
  for (const auto& [l, p] : never) report_failed(peer, l, p);
}

void VerbsTransport::end_overdue_drains() {
  const auto now = std::chrono::steady_clock::now();
  for (int p = 0; p < npeers() && draining_peers_ > 0; ++p) {
    Peer& pr = peers_[p];
    if (!pr.draining || now < pr.drain_deadline) continue;
    size_t left = 0;
    for (const Lane& ln : pr.lanes) left += ln.pending.size();
    RWIN_LOG(Warn, Verbs, "%s: %zu work requests not flushed by the device within %lld s of the failure: "
             "destroying the queue pairs", who(p).c_str(), left,
             static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kDrainLimit).count()));
    retire_qp(p);
    for (size_t l = 0; l < pr.lanes.size(); ++l) {
      for (const Pending& q : pr.lanes[l].pending) report_failed(p, static_cast<int>(l), q);
      pr.lanes[l].pending.clear();
    }
    pr.draining = false;
    --draining_peers_;
  }
}

void VerbsTransport::read_async_events() noexcept {
  for (size_t r = 0; r < rails_.size(); ++r) read_async_events(r);
}

void VerbsTransport::read_async_events(size_t rail) noexcept {
  Rail& rl = rails_[rail];
  ibv_context* ctx = rl.dev->ctx.get();
  if (!rl.async_nonblocking) {
    const int fl = fcntl(ctx->async_fd, F_GETFL);
    if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) != 0) return;  // never block in poll()
    rl.async_nonblocking = true;
  }
  ibv_async_event ev{};
  while (ibv_get_async_event(ctx, &ev) == 0) {
    const ibv_event_type type = ev.event_type;
    ibv_qp* qp = nullptr;
    int port = 0;
    switch (type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR:
        qp = ev.element.qp;
        break;
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_GID_CHANGE:
        port = ev.element.port_num;
        break;
      default:
        break;
    }
    // Acknowledge before acting: ibv_destroy_qp (fail_peer of a run-time peer) waits for it.
    ibv_ack_async_event(&ev);
    const std::string what = std::string("the device reported async event ") + ibv_event_type_str(type);
    if (qp) {
      for (int p = 0; p < npeers(); ++p) {
        for (size_t l = 0; l < peers_[p].lanes.size(); ++l) {
          if (peers_[p].lanes[l].qp.get() != qp) continue;
          fail_peer(p, who(p) + " qp " + hex(qp->qp_num) +
                           (peers_[p].lanes.size() > 1 ? " (lane " + std::to_string(l) + ")" : std::string()) + ": " +
                           what + " (the queue pair is in the error state; outstanding work is flushed)");
        }
      }
    } else if ((type == IBV_EVENT_PORT_ERR && port == rl.info.port) || type == IBV_EVENT_CQ_ERR ||
               type == IBV_EVENT_DEVICE_FATAL) {
      // Every peer has a queue pair on every device (lane l on device l % devices): all of them fail.
      const std::string why = type == IBV_EVENT_PORT_ERR
                                  ? what + ": " + rl.info.name + " port " + std::to_string(port) + " went down"
                                  : what + " on " + rl.info.name + " (every queue pair of it stops)";
      for (int p = 0; p < npeers(); ++p) {
        if (peers_[p].error.empty()) fail_peer(p, who(p) + ": " + why);
      }
    } else {
      RWIN_LOG(Info, Verbs, "%s: %s: %s: %s (port %d)", self_.c_str(), describe_.c_str(), rl.info.name.c_str(),
               what.c_str(), port);
    }
  }
}

void VerbsTransport::quiesce(bool /*graceful: an RC QP moved to error needs no goodbye*/) noexcept {
  for (int p = 0; p < npeers(); ++p) {
    fail_peer(p, who(p) + ": transport closed (context shutting down)");
  }
  // The caller deregisters and frees memory next: wait (bounded) until the device has returned
  // every posted WR, then destroy the QPs of peers it did not drain.
  try {
    std::vector<Completion> sink;
    const auto until = std::chrono::steady_clock::now() + kDrainLimit;
    while (draining_peers_ > 0 && std::chrono::steady_clock::now() < until) poll(sink);
  } catch (...) {  // poll() allocates; nothing else can throw here
  }
  for (int p = 0; p < npeers(); ++p) {
    if (peers_[p].draining) {
      retire_qp(p);
      for (Lane& ln : peers_[p].lanes) ln.pending.clear();
      peers_[p].draining = false;
      --draining_peers_;
    }
  }
}

void VerbsTransport::post_waited_chains() {
  size_t keep = 0;
  for (size_t i = 0; i < dirty_.size(); ++i) {
    const LaneRef r = dirty_[i];
    Peer& pr = peers_[r.peer];
    Lane& ln = pr.lanes[static_cast<size_t>(r.lane)];
    if (pr.error.empty() && ln.needs_post) flush_staged(r.peer, r.lane);
    if (pr.error.empty() && !ln.staged.empty()) {
      dirty_[keep++] = r;  // early Writes only: they wait for the next op to this peer
    } else {
      ln.dirty = false;
    }
  }
  dirty_.resize(keep);
}

void VerbsTransport::poll(std::vector<Completion>& out) {
  if ((++polls_ & 255) == 0) read_async_events();  // rare events; a syscall per call would cost
  if (draining_peers_ > 0) end_overdue_drains();
  post_waited_chains();
  // Run-time peers live on rail 0 only: the other rails' CQs have nothing to give.
  const size_t rails = cfg_.dynamic_peers ? 1 : rails_.size();
  for (size_t rail = 0; rail < rails && (live_qps_ > 0 || retired_undrained_ > 0); ++rail) {
    Rail& rl = rails_[rail];
    ibv_wc wc[kPollBatch];
    // Bounded: at most one pass over everything the CQ can hold, so poll() never spins.
    const int max_rounds = rl.cq_cqe / kPollBatch + 1;
    for (int round = 0; round < max_rounds; ++round) {
      // QPs destroyed before this ibv_poll_cq call add no WCs any more: once it finds the CQ
      // empty, theirs are all consumed (a peer failed while handling this batch is not).
      const size_t retired_before = retired_undrained_;
      const int n = ibv_poll_cq(rl.cq.get(), kPollBatch, wc);
      if (n < 0) {
        for (int p = 0; p < npeers(); ++p) {
          if (peers_[p].error.empty()) {
            fail_peer(p, who(p) + ": " + rl.info.name + ": ibv_poll_cq failed (returned " + std::to_string(n) + ")");
          }
        }
        break;
      }
      counters_.cqes += static_cast<uint64_t>(n);
      for (int i = 0; i < n; ++i) {
        const int peer = wr_peer(wc[i].wr_id);
        const int lane = wr_lane(wc[i].wr_id);
        if (peer < 0 || peer >= npeers() || static_cast<size_t>(lane) >= peers_[peer].lanes.size()) continue;
        if (wc[i].status == IBV_WC_SUCCESS)
          on_success(peer, lane, wr_seq(wc[i].wr_id));
        else
          on_error(peer, lane, wc[i]);
      }
      if (n < kPollBatch) {
        if (rail + 1 == rails) retired_undrained_ -= retired_before;  // every CQ was found empty
        break;
      }
    }
  }
  post_waited_chains();  // Swap retries staged by on_success()
  out.insert(out.end(), std::make_move_iterator(ready_.begin()), std::make_move_iterator(ready_.end()));
  ready_.clear();
}

std::string VerbsTransport::peer_error(int peer) const {
  if (peer < 0 || peer >= npeers()) return "no such peer " + std::to_string(peer);
  return peers_[peer].error;
}

}  // namespace rwin::transport::verbs

// put(atomic = Add): element-wise accumulation, applied by the CPU under the buffer's stripe locks.
//
// Three paths, one locking discipline (stripe_locks.h):
//  - mapped: the destination is this rank's own memory, or a peer's that the transport mapped into
//    this process (UCX direct mode: shared memory on one host). The caller adds in place.
//  - target-applied: the transport's target adds itself (Capabilities::max_add_bytes; rwin's tcp,
//    whose receiver thread serves whether or not its owner is inside rwin). The addends travel as
//    Accumulate work and the target runs the buffer's RegionAdder (below).
//  - staged: every other peer. The caller writes its addends into slots of the target's staging
//    region and the target adds them in its progress (staging.h, staging.cpp).
// Either way the element loop runs with the stripe's lock held by whoever runs it, so put(Add)s
// from any ranks through any paths into the same elements never lose an update or tear an element.
// They are not atomic against plain puts, notifies or CPU stores to the same bytes (docs/CONTRACT.md).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "chunk_planner.h"
#include "context_impl.h"
#include "dtype_math.h"
#include "ops.h"
#include "stripe_locks.h"
#include "wait_until.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::Work;

namespace {

std::string stripe_name(const LockWait& lw, uint64_t stripe) {
  return "stripe " + std::to_string(stripe) + " (bytes " + std::to_string(stripe * kStripeBytes) + "..+" +
         std::to_string(kStripeBytes) + ") of " + (lw.buf ? lw.buf->describe() : std::string("a buffer")) +
         (lw.target >= 0 ? " on peer " + std::to_string(lw.target) : std::string());
}

// Takes the lock word of `stripe`; returns once it is ours.
void lock_stripe(ContextImpl& c, uint64_t* word, uint64_t stripe, const LockWait& lw) {
  const uint64_t me = static_cast<uint64_t>(c.rank) + 1;
  if (try_lock(word, me) == 0) return;
  Deadline own(c.opt.op_timeout);
  Deadline& deadline = lw.deadline ? *lw.deadline : own;
  uint64_t holder = 0;
  int h = -1;
  WaitFor wf{"stripe lock", lw.target};
  wf.deadline_mask = 63;
  const auto what = [&] { return c.who() + ": " + (lw.what ? *lw.what : std::string("applying put(Add)")); };
  wait_until(
      c, wf, deadline,
      [&](uint64_t round) {
        holder = try_lock(word, me);
        if (holder == 0) return true;
        if ((round & 63) != 63) return false;
        // A holder only runs an element loop: this is rare and short, unless the holder died in it.
        if (!lw.in_progress) c.progress();
        c.watch();
        h = holder <= static_cast<uint64_t>(c.nranks) ? static_cast<int>(holder) - 1 : -1;
        if (h >= 0 && !c.peers[static_cast<size_t>(h)].failed.empty()) {
          if (lw.in_progress) {
            uint64_t expected = holder;  // break the dead holder's lock, then take it as usual
            std::atomic_ref<uint64_t>(*word).compare_exchange_strong(expected, 0, std::memory_order_relaxed);
            return false;
          }
          throw Error(ErrorCode::PeerFailed, what() + ": " + stripe_name(lw, stripe) + " is locked by rank " +
                                                 std::to_string(h) + ", which failed: " +
                                                 c.peer_failed_text(h, c.peers[static_cast<size_t>(h)].failed));
        }
        if (lw.target >= 0 && !c.peers[static_cast<size_t>(lw.target)].failed.empty()) {
          throw Error(ErrorCode::PeerFailed, what() + ": " + c.peer_failed_text(lw.target, c.peers[static_cast<size_t>(lw.target)].failed));
        }
        return false;
      },
      [&] {
        c.degraded = true;
        h = holder <= static_cast<uint64_t>(c.nranks) ? static_cast<int>(holder) - 1 : -1;
        throw Error(ErrorCode::Timeout, what() + ": " + stripe_name(lw, stripe) + " still locked by rank " +
                                            (h >= 0 ? std::to_string(h) : "(lock word " + std::to_string(holder) + ")") +
                                            " after " + std::to_string(deadline.limit().count()) + " ms");
      });
}

}  // namespace

void detail::add_locked(ContextImpl& c, char* base, uint64_t buf_bytes, uint64_t off, const char* src, uint64_t bytes,
                        DType t, const LockWait& lw) {
  auto* locks = reinterpret_cast<uint64_t*>(base + lock_offset(buf_bytes));
  const size_t esz = dtype_size(t);
  const uint64_t end = off + bytes;
  while (off < end) {
    const uint64_t piece_end = stripe_piece_end(off, end);  // a multiple of esz from off: stripes are
    const uint64_t stripe = off / kStripeBytes;              // multiples of 8, views element aligned
    lock_stripe(c, locks + stripe, stripe, lw);
    add_into(t, base + off, src, (piece_end - off) / esz);
    unlock(locks + stripe);
    src += piece_end - off;
    off = piece_end;
  }
}

namespace {

// The target-applied path's target half, run by the transport's receiving thread for each
// Accumulate that lands in a window buffer of this rank: the element loop under the stripe locks,
// held with this rank's id. The other holders of these locks are this process's own threads (its
// in-place put(Add)s; no peer maps the memory of a transport that applies adds itself), each for
// one element loop, so a lock is free within microseconds; one that is not within the operation
// deadline is refused (the source fails with the reason) rather than waited for forever. Every
// stripe of the range is taken, in ascending order, before anything is added: a refusal adds nothing.
class StripeAdder final : public transport::RegionAdder {
 public:
  StripeAdder(char* base, uint64_t bytes, uint64_t holder, std::chrono::milliseconds limit, std::string name)
      : base_(base), bytes_(bytes), holder_(holder), limit_(limit), name_(std::move(name)) {}

  std::string add(uint64_t code, uint64_t off, const char* src, uint64_t bytes) const noexcept override {
    try {
      const auto t = static_cast<DType>(code);
      const size_t esz = code <= 255 ? dtype_size(t) : 0;
      if (esz == 0) return "element type code " + std::to_string(code) + " is not a DType";
      if (off > bytes_ || bytes > bytes_ - off) {
        return std::to_string(bytes) + " bytes at offset " + std::to_string(off) + " lie outside the " +
               std::to_string(bytes_) + " bytes of " + name_;
      }
      if (bytes == 0 || off % esz != 0 || bytes % esz != 0) {
        return std::to_string(bytes) + " bytes at offset " + std::to_string(off) + " of " + name_ +
               " are not whole " + dtype_name(t) + " elements";
      }
      auto* locks = reinterpret_cast<uint64_t*>(base_ + lock_offset(bytes_));
      const uint64_t first = off / kStripeBytes, last = (off + bytes - 1) / kStripeBytes;
      const auto deadline = std::chrono::steady_clock::now() + limit_;
      for (uint64_t s = first; s <= last; ++s) {
        uint64_t held = 0;
        for (uint32_t spin = 0; (held = try_lock(locks + s, holder_)) != 0; ++spin) {
          if (spin < 64) continue;
          std::this_thread::yield();
          if ((spin & 255) == 255 && std::chrono::steady_clock::now() > deadline) {
            for (uint64_t u = first; u < s; ++u) unlock(locks + u);
            return "stripe " + std::to_string(s) + " of " + name_ + " still locked (lock word " +
                   std::to_string(held) + ") after " + std::to_string(limit_.count()) + " ms: nothing added";
          }
        }
      }
      add_into(t, base_ + off, src, bytes / esz);
      for (uint64_t s = first; s <= last; ++s) unlock(locks + s);
      return {};
    } catch (...) {  // a message that could not be built (out of memory): still a refusal
      return "refused";
    }
  }

 private:
  char* base_;
  uint64_t bytes_;
  uint64_t holder_;
  std::chrono::milliseconds limit_;
  std::string name_;
};

// The target-applied path's source half: the addends go as Accumulate work, pipelined as a put's
// chunks (at most max_add_bytes each: the target holds a whole one before adding it); the flush
// after them returns once every sum is in place, as the target applies a connection's requests
// in order and answers the flush after them. Refusals and failures arrive as the peer's failure.
void run_target_applied(ContextImpl& c, const Xfer& x, const std::string& what) {
  const uint64_t max_chunk = std::min<uint64_t>(c.opt.chunk_bytes, c.caps.max_add_bytes);
  run_transfer(c, Op::Accumulate, x, "put(Add)", max_chunk);  // its errors name the peer and the bytes
  Deadline deadline(c.opt.op_timeout);
  c.drain(x.peer, deadline, what.c_str());  // throws PeerFailed naming the target's refusal
}

// The staged path: slots into the target's staging region, each acknowledged once applied.
void run_staged(ContextImpl& c, const Xfer& x, const std::string& what) {
  const int peer = x.peer;
  const size_t p = static_cast<size_t>(peer);
  StagingState& st = *c.staging;
  PeerState& ps = c.peers[p];
  const StagingLayout& tl = st.layouts[p];
  const uint64_t payload = std::min<uint64_t>(tl.payload_bytes(), (c.caps.max_message_bytes - kSlotHeaderBytes) & ~uint64_t{63});
  const transport::RemoteKey& skey = *st.rkeys[p];
  Deadline deadline(c.opt.op_timeout);
  ChunkPlanner planner = plan_chunks(c, x, payload);
  const auto acked = [&] {
    return std::atomic_ref<uint64_t>(*st.word(st.mine.acked_word(peer))).load(std::memory_order_acquire);
  };
  Transfer tr;
  // Waits until `done()`; throws PeerFailed / Timeout naming the rest of the transfer.
  // While only the peer's acks are awaited nothing of ours is in flight to it, so a peer that died
  // shows only through the bootstrap lease, and not at all once the store died too (rank 0 killed).
  // Every 100 ms of waiting, a flush probes it: to a dead peer it fails, naming it.
  auto next_probe = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  const auto wait_for = [&](auto done, const Chunk* ch) {
    WaitFor wf{ch ? "a free staging slot" : "the target to apply its slots", peer};
    wait_until(
        c, wf, deadline,
        [&](uint64_t) {
          if (done()) return true;
          c.progress();
          if (done()) return true;
          c.watch();
          if (ps.outstanding == 0 && ps.failed.empty() && std::chrono::steady_clock::now() > next_probe) {
            c.post_flush(peer, deadline);
            next_probe = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
          }
          if (!ps.failed.empty()) throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + ": " + c.peer_failed_text(peer, ps.failed));
          if (!tr.error.empty()) throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + ": " + c.peer_failed_text(peer, tr.error));
          return false;
        },
        [&] {
          c.degraded = true;
          const std::string at = ch ? "waiting for a free slot for bytes " + std::to_string(ch->remote_offset) + "..+" +
                                          std::to_string(ch->bytes) + " of the slice"
                                    : "waiting for the peer to apply the last slots";
          throw Error(ErrorCode::Timeout, c.who() + ": " + what + ": " + at + ": " + std::to_string(st.posted_to[p] - acked()) +
                                              " slot(s) posted and not applied after " +
                                              std::to_string(deadline.limit().count()) +
                                              " ms (the target applies them only while it is inside an rwin call; " +
                                              c.tp->describe() + ")");
        });
    if (!tr.error.empty()) throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + ": " + c.peer_failed_text(peer, tr.error));
  };
  try {
    Chunk ch;
    while (planner.next(ch)) {
      wait_for([&] { return st.posted_to[p] - acked() < st.mine.slots; }, &ch);
      const uint64_t seq = st.posted_to[p];
      const uint64_t k = seq % tl.slots;
      char* out = static_cast<char*>(st.mr->addr()) + st.mine.outbox(k);
      SlotHeader h;
      h.dtype = static_cast<uint8_t>(x.dtype);
      h.src = static_cast<uint32_t>(c.rank);
      h.seq = seq;
      h.addr = x.remote_base + ch.remote_offset;
      h.bytes = ch.bytes;
      std::memcpy(out, &h, sizeof h);
      std::memcpy(out + kSlotHeaderBytes, x.local_base + ch.local_offset, ch.bytes);
      Work w;
      w.op = Op::Write;
      w.peer = peer;
      w.local = out;
      w.local_mr = st.mr.get();
      w.rkey = &skey;
      w.remote_addr = skey.base() + tl.inbox(c.rank, k);
      w.bytes = kSlotHeaderBytes + ch.bytes;
      Slot s;
      s.kind = Slot::Chunk;
      s.peer = peer;
      s.transfer = &tr;
      s.index = seq;
      s.total = planner.total_chunks();
      c.post_blocking(w, s, deadline, "put(Add)");
      tr.inflight++;
      // The "posted" bump must land after the slot: in order on an ordered transport (one RC QP,
      // UCX am), else after a flush (as notify does after puts, signals.cpp).
      if (!ps.ordered) c.drain(peer, deadline, "put(Add)");
      Work a;
      a.op = Op::AtomicAdd;
      a.peer = peer;
      a.rkey = &skey;
      a.remote_addr = skey.base() + tl.posted_word(c.rank);
      a.bytes = 8;
      a.operand = 1;
      Slot as;
      as.kind = Slot::Async;
      as.peer = peer;
      c.post_blocking(a, as, deadline, "put(Add)");
      ps.outstanding++;
      // The doorbells that lead the target to this source without reading every posted word
      // (staging.h); in any order with the posted bump: the target rescans until they agree.
      const int g = c.rank / kBellFanout;
      for (int level = 0; level < (tl.two_level() ? 2 : 1); ++level) {
        a.remote_addr = skey.base() + (level == 0 ? tl.group_bell_word(g) : tl.top_bell_word());
        c.post_blocking(a, as, deadline, "put(Add)");
        ps.outstanding++;
      }
      ps.unflushed = true;
      st.posted_to[p]++;
      c.progress();  // on its way now (transport.h: a transport may hold posted work until a poll)
    }
    wait_for([&] { return acked() == st.posted_to[p] && tr.inflight == 0; }, nullptr);
  } catch (...) {
    c.abandon(tr);
    throw;
  }
}

}  // namespace

// put(atomic = Add): dst[i] += src[i] (dtype_math.h: integers wrap, f16/bf16 round once per
// element update), atomic per element against every other put(Add) into the same elements.
// Returns once every element is added at the target, so a notify after it is ordered behind the sums.
void detail::run_accumulate(ContextImpl& c, const Xfer& x, const WindowState& dst) {
  const int peer = x.peer;
  PeerStats& st = c.peer_stats[static_cast<size_t>(peer)];
  ++st.put_adds;
  st.put_add_bytes += static_cast<uint64_t>(x.shape[0]) * static_cast<uint64_t>(x.shape[1]) * x.esz;
  if (c.open_span) c.open_span->add_work(static_cast<uint64_t>(x.shape[0]) * static_cast<uint64_t>(x.shape[1]) * x.esz, 0);
  const std::string what = "put(Add) to peer " + std::to_string(peer) + " into " + dst.describe();
  const BufferState& b = *dst.buf;
  const transport::RemoteKey& rkey = *x.rkey;
  char* mapped = peer == c.rank ? static_cast<char*>(b.mr->addr())
                                : static_cast<char*>(c.tp->mapped(peer, rkey, rkey.base(), region_bytes(b.bytes)));
  if (mapped == nullptr) return c.caps.max_add_bytes > 0 ? run_target_applied(c, x, what) : run_staged(c, x, what);
  Deadline deadline(c.opt.op_timeout);
  LockWait lw;
  lw.buf = &b;
  lw.target = peer == c.rank ? -1 : peer;
  lw.deadline = &deadline;
  lw.what = &what;
  const uint64_t view = x.remote_base - rkey.base();  // the view's byte offset in its buffer
  ChunkPlanner planner = plan_chunks(c, x, uint64_t{1} << 62);  // runs, uncut
  Chunk run;
  while (planner.next(run)) {
    add_locked(c, mapped, b.bytes, view + run.remote_offset, x.local_base + run.local_offset, run.bytes, x.dtype, lw);
  }
}

std::shared_ptr<const transport::RegionAdder> detail::make_region_adder(const ContextImpl& c, char* base, uint64_t bytes,
                                                                        std::string name) {
  return std::make_shared<StripeAdder>(base, bytes, static_cast<uint64_t>(c.rank) + 1, c.opt.op_timeout, std::move(name));
}

}  // namespace rwin

// put(atomic = Add): element-wise remote accumulation through the transport's atomics.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "chunk_planner.h"
#include "context_impl.h"
#include "dtype_math.h"
#include "ops.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::Work;

namespace {

// Waits until at most `limit` atomics of `tr` are in flight; throws on failure or deadline.
static void settle(ContextImpl& c, Transfer& tr, int peer, Deadline& deadline, const std::string& what,
                   int limit = 0) {
  Backoff backoff;
  while (tr.inflight > limit) {
    c.progress();
    if (tr.inflight <= limit) break;
    c.watch();
    if (const std::string& f = c.peers[static_cast<size_t>(peer)].failed; !f.empty()) {
      c.abandon(tr);
      throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + ": " + c.peer_failed_text(peer, f));
    }
    if (deadline.passed()) {
      c.peers[static_cast<size_t>(peer)].failed = c.who() + ": " + what + ": deadline passed";
      c.abandon(tr);
      throw Error(ErrorCode::Timeout, c.who() + ": " + what + ": " + std::to_string(tr.inflight) +
                                          " element atomics unfinished after " +
                                          std::to_string(c.opt.op_timeout.count()) + " ms (" + c.tp->describe() + ")");
    }
    backoff.idle();
  }
  if (!tr.error.empty()) throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + ": " + c.peer_failed_text(peer, tr.error));
}

}  // namespace

// put(atomic = Add): dst[i] += src[i], atomic against every other Add into the same elements.
// 64-bit integers use the transport's remote fetch-add directly. Other dtypes (floats, and 1-, 2-
// and 4-byte elements, which RDMA atomics cannot address on their own) use compare-and-swap on the
// aligned 8-byte word that holds them: guess, CAS, retry with the value the CAS returned. Every
// element of the slice that lies in one word (up to 8 i8/u8, 4 of 2 bytes, 2 of 4 bytes) is folded
// into one CAS; a byte mask names them, and the other bytes of the word (other ranks' elements,
// neighbours outside the slice) are written back exactly as the CAS saw them. The arithmetic per
// element is dtype_math.h's (integers wrap, f16/bf16 round once to nearest even). Words are
// aligned in the peer's address space (its buffer is page aligned; a view may start at any element
// boundary, so no element straddles two words).
void detail::run_accumulate(ContextImpl& c, const Xfer& x, const std::string& remote_name) {
  const int peer = x.peer;
  Deadline deadline(c.opt.op_timeout);
  const std::string what = "put(Add) peer " + std::to_string(peer) + " into " + remote_name;
  const size_t esz = x.esz;
  // Runs only (no cutting): the atomics go element by element.
  ChunkPlanner planner = plan_chunks(c, x, uint64_t{1} << 62);
  const transport::RemoteKey& rkey = *x.rkey;
  const char* base = x.local_base;
  Transfer tr;
  detail::Chunk run;
  // Posts one element atomic, keeping at most kAtomicsInFlight of them outstanding.
  auto post_atomic = [&](Work& w) {
    settle(c, tr, peer, deadline, what, kAtomicsInFlight - 1);
    w.peer = peer;
    w.rkey = &rkey;
    w.bytes = 8;
    Slot s;
    s.kind = Slot::Atomic;
    s.peer = peer;
    s.transfer = &tr;
    c.post_blocking(w, s, deadline, "put(Add)");
    tr.inflight++;
  };

  if (x.dtype == DType::I64 || x.dtype == DType::U64) {
    while (planner.next(run)) {
      for (uint64_t off = 0; off < run.bytes; off += 8) {
        Work w;
        w.op = Op::AtomicAdd;
        w.remote_addr = x.remote_base + run.remote_offset + off;
        std::memcpy(&w.operand, base + run.local_offset + off, 8);
        post_atomic(w);
      }
    }
    settle(c, tr, peer, deadline, what);
    return;
  }

  // One entry per remote 8-byte word touched, with the addend of each element laid out as in the word.
  struct WordUpdate {
    uint64_t remote_word;  // the peer's address of the aligned word
    char addend[8];        // element values to add, laid out as in the word
    uint8_t mask;          // bit b: byte b of the word belongs to an element that takes part
    uint64_t guess;        // what we believe the word holds
  };
  std::vector<WordUpdate> words;
  while (planner.next(run)) {
    for (uint64_t off = 0; off < run.bytes; off += esz) {
      const uint64_t ro = x.remote_base + run.remote_offset + off;
      const uint64_t word = ro & ~uint64_t{7};
      if (words.empty() || words.back().remote_word != word) words.push_back(WordUpdate{word, {}, 0, 0});
      WordUpdate& u = words.back();
      const size_t at = static_cast<size_t>(ro - word);  // a multiple of esz: elements never straddle words
      std::memcpy(u.addend + at, base + run.local_offset + off, esz);
      u.mask |= element_mask(at, esz);
    }
  }
  auto apply = [dt = x.dtype](const WordUpdate& u, uint64_t old) { return add_in_word(dt, old, u.addend, u.mask); };
  auto* results = static_cast<uint64_t*>(c.scratch->addr()) + 1;
  const size_t batch_max = kScratchWords - 1;
  for (size_t first = 0; first < words.size(); first += batch_max) {
    const size_t count = std::min(batch_max, words.size() - first);
    std::vector<size_t> pending(count);
    for (size_t i = 0; i < count; ++i) pending[i] = i;
    while (!pending.empty()) {
      for (size_t i : pending) {
        WordUpdate& u = words[first + i];
        Work w;
        w.op = Op::CompareSwap;
        w.local = &results[i];
        w.local_mr = c.scratch.get();
        w.remote_addr = u.remote_word;
        w.compare = u.guess;
        w.operand = apply(u, u.guess);
        post_atomic(w);
      }
      settle(c, tr, peer, deadline, what);
      std::vector<size_t> again;
      for (size_t i : pending) {
        WordUpdate& u = words[first + i];
        const uint64_t seen = std::atomic_ref<uint64_t>(results[i]).load(std::memory_order_acquire);
        if (seen != u.guess) {  // someone else got there first: retry from what is there now
          u.guess = seen;
          again.push_back(i);
        }
      }
      pending.swap(again);
    }
  }
}

}  // namespace rwin

// The data path under every operation: slots and completions, posting with back-pressure,
// flush/drain per peer, quiet, and the progress-driving barrier.
#include <algorithm>
#include <atomic>
#include <sched.h>

#include <cstdio>

#include "context_impl.h"
#include "ops.h"
#include "wait_until.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::PostResult;
using transport::Work;

uint32_t ContextImpl::take_slot(const Slot& s) {
  uint32_t id;
  if (free_slots.empty()) {
    id = static_cast<uint32_t>(slots.size());
    slots.push_back(s);
  } else {
    id = free_slots.back();
    free_slots.pop_back();
    slots[id] = s;
  }
  return id;
}

void ContextImpl::peer_check_failed(int peer, const char* op) {
  if (peer < 0 || peer >= nranks) {
    throw Error(ErrorCode::PeerOutOfRange, who() + ": " + op + " to peer " + std::to_string(peer) +
                                               ": peer out of range (job has ranks 0.." +
                                               std::to_string(nranks - 1) + ")");
  }
  // Called only when a check failed: in range, so the peer has failed.
  // (A failure the transport saw without a completion, e.g. an endpoint error, is reported by its
  // post(), as PeerFailed with the transport's message: no need to ask on every call.)
  throw Error(ErrorCode::PeerFailed, who() + ": " + op + " to peer " + std::to_string(peer) + ": " +
                                         peer_failed_text(peer, peers[static_cast<size_t>(peer)].failed));
}

// Posts one work request, polling while the transport is full. Throws on deadline or failure.
void ContextImpl::post_blocking(Work& w, const Slot& s, Deadline& deadline, const char* what) {
  const uint32_t id = take_slot(s);
  w.cookie = id;
  WaitFor wf{"room in the transport's queue", w.peer};
  wait_until(
      *this, wf, deadline,
      [&](uint64_t) {
        const PostResult r = tp->post(w);
        if (r == PostResult::Ok) return true;
        if (r == PostResult::PeerFailed) {
          free_slots.push_back(id);
          std::string err = tp->peer_error(w.peer);
          peers[static_cast<size_t>(w.peer)].failed = err;
          throw Error(ErrorCode::PeerFailed, who() + ": " + what + " to peer " + std::to_string(w.peer) + ": " +
                                                 peer_failed_text(w.peer, err));
        }
        progress();
        watch();  // a dead peer's post() then returns PeerFailed
        return false;
      },
      [&] {
        free_slots.push_back(id);
        degraded = true;
        throw Error(ErrorCode::Timeout, who() + ": " + what + " to peer " + std::to_string(w.peer) +
                                            ": transport stayed busy until the deadline (" + tp->describe() + ")");
      });
}

void ContextImpl::progress() {
  completions.clear();
  // Staged put(Add)s first: the acknowledgements it posts then leave with this poll.
  if (staging) apply_staged();
  tp->poll(completions);
  for (auto& c : completions) {
    if (c.cookie & kSyncBit) {
      const int p = static_cast<int>((c.cookie >> 32) & 0x7fffffff);
      if (!c.ok && peers[static_cast<size_t>(p)].failed.empty()) peers[static_cast<size_t>(p)].failed = c.error;
      if (c.cookie == sync_cookie) {
        sync_done = true;
        if (!c.ok) sync_error = std::move(c.error);
      }
      continue;  // a stale one (its op timed out) only returns nothing
    }
    Slot& s = slots[c.cookie];
    PeerState& peer = peers[static_cast<size_t>(s.peer)];
    switch (s.kind) {
      case Slot::Chunk:
        if (!s.transfer) break;  // its transfer gave up (deadline); only the slot is returned
        s.transfer->inflight--;
        if (!c.ok && s.transfer->error.empty()) {
          s.transfer->error = c.error;
          if (s.kind == Slot::Chunk) {
            s.transfer->error += " (chunk " + std::to_string(s.index + 1) + "/" + std::to_string(s.total) + ")";
          }
        }
        break;
      case Slot::Flush:
      case Slot::Async:
        peer.outstanding--;
        break;
      case Slot::Fetch:
        if (!fetch_completed(static_cast<uint32_t>(c.cookie), c)) continue;  // a CAS retry keeps its slot
        peer.outstanding--;
        break;
    }
    if (!c.ok && peer.failed.empty()) peer.failed = c.error;
    free_slots.push_back(static_cast<uint32_t>(c.cookie));
  }
  if (!fetch_retry.empty()) post_fetch_retries();
}

void ContextImpl::post_flush(int peer, Deadline& deadline) {
  PeerState& ps = peers[static_cast<size_t>(peer)];
  Slot s;
  s.kind = Slot::Flush;
  s.peer = peer;
  Work w;
  w.op = Op::Flush;
  w.peer = peer;
  post_blocking(w, s, deadline, "flush");
  ps.outstanding++;
  ps.dirty = false;
  ps.unflushed = false;
}

bool ContextImpl::drain_start(int peer, Deadline& deadline) {
  PeerState& ps = peers[static_cast<size_t>(peer)];
  if (ps.direct && caps.cpu_atomics && ps.outstanding == 0 && ps.failed.empty()) {
    // Every op to a mapped peer already happened (CPU stores and atomics); the fence orders them
    // before whatever the caller does next. Not so where atomics go through the transport
    // (!cpu_atomics: NIC atomics in the job, docs/CONTRACT.md): a UCX atomic may count as complete
    // once UCX took it while it still waits in UCX's queue (emulated over active messages, as on
    // rxe), and only the flush below makes it done at the target.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    ps.dirty = false;
    ps.unflushed = false;
    return false;
  }
  if (ps.failed.empty()) post_flush(peer, deadline);
  return true;
}

void ContextImpl::drain_finish(int peer, Deadline& deadline, const char* what) {
  PeerState& ps = peers[static_cast<size_t>(peer)];
  WaitFor wf{"flush", peer};
  wait_until(
      *this, wf, deadline,
      [&](uint64_t) {
        if (ps.outstanding == 0 || !ps.failed.empty()) return true;
        progress();
        if (ps.outstanding == 0 || !ps.failed.empty()) return true;
        watch();
        return !ps.failed.empty();
      },
      [&] {
        degraded = true;
        const std::string msg = who() + ": " + what + ": peer " + std::to_string(peer) +
                                " did not complete its operations by the deadline; " + outstanding_summary() +
                                fetch_summary(peer);
        detach_fetches(peer);  // a late completion must not write into the caller's memory
        throw Error(ErrorCode::Timeout, msg);
      });
  if (!ps.failed.empty()) {
    detach_fetches(peer);
    throw Error(ErrorCode::PeerFailed, who() + ": " + what + ": " + peer_failed_text(peer, ps.failed));
  }
  release_nbi_pins();
}

void ContextImpl::quiet(std::chrono::milliseconds timeout) {
  Deadline deadline(timeout);
  try {
    // Every peer's flush in flight before waiting for any (one round trip, not one per peer).
    std::vector<int>& started = quiet_peers;
    started.clear();
    for (int p = 0; p < nranks; ++p) {
      const PeerState& ps = peers[static_cast<size_t>(p)];
      if ((ps.unflushed || ps.outstanding > 0) && drain_start(p, deadline)) started.push_back(p);
    }
    for (const int p : started) drain_finish(p, deadline, "quiet");
  } catch (...) {
    detach_fetches(-1);  // quiet failed: no fetch location is written after it returned
    throw;
  }
}

// A barrier that keeps the transport progressing while it waits: over tcp a peer still flushing
// towards us needs our progress to finish, so a blocking store wait here could deadlock.
void ContextImpl::barrier(std::chrono::milliseconds timeout) {
  quiet(timeout);
  try {
    bs->barrier(timeout, [this] {
      progress();
      sched_yield();  // each store round trip already costs tens of microseconds
    });
    // The peers' puts and gets before the barrier were complete at their quiet; a transport whose
    // own thread served them (rwin's tcp) is ordered before what this caller does next.
    tp->sync_arrivals();
  } catch (const bootstrap::BootstrapError& e) {
    degraded = true;
    throw store_error(e, "");  // names this rank, the barrier and the missing or failed ranks (store_error: and the failure it learned)
  }
}

void ContextImpl::leave_barrier(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  Deadline deadline(timeout);
  detach_fetches(-1);  // the Context is going: its caller's fetch locations may be too
  watch_now();
  std::vector<int>& started = quiet_peers;  // every flush in flight first, as quiet() does
  started.clear();
  for (int p = 0; p < nranks; ++p) {
    const PeerState& ps = peers[static_cast<size_t>(p)];
    if (!ps.failed.empty() || !(ps.unflushed || ps.outstanding > 0)) continue;
    try {
      if (drain_start(p, deadline)) started.push_back(p);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::PeerFailed) throw;  // a failed peer is not waited for
    }
  }
  for (const int p : started) {
    try {
      drain_finish(p, deadline, "shutdown");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::PeerFailed) throw;
    }
  }
  try {
    const auto used = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    bs->barrier(std::max(std::chrono::milliseconds(1), timeout - used), [this] {
      progress();
      sched_yield();
    }, /*survivors_only=*/true);
  } catch (const bootstrap::BootstrapError& e) {
    degraded = true;
    throw store_error(e, "");
  }
  watch_now();  // the failures the barrier learned, for the transport's shutdown
}

// Chunks still in flight point at a Transfer on the caller's stack: detach them before it goes.
void ContextImpl::abandon(Transfer& t) noexcept {
  for (auto& s : slots) {
    if (s.transfer == &t) s.transfer = nullptr;
  }
}

const transport::MemoryRegion* ContextImpl::acquire_local(const void* p, uint64_t bytes) {
  if (!regcache) return nullptr;  // the transport needs no registration of local memory
  try {
    return regcache->acquire(p, bytes);
  } catch (const transport::TransportError& e) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "%p", p);
    throw Error(ErrorCode::Transport, who() + ": registering local memory at " + addr + " (" + std::to_string(bytes) +
                                          " bytes): " + e.what());
  }
}

void ContextImpl::release_nbi_pins() noexcept {
  if (nbi_pins.empty() || !regcache) return;
  for (const auto& p : peers) {
    if (p.outstanding > 0) return;
  }
  for (const auto* mr : nbi_pins) regcache->release(mr);
  nbi_pins.clear();
}

std::string ContextImpl::outstanding_summary() const {
  std::string s;
  for (int p = 0; p < nranks; ++p) {
    const PeerState& ps = peers[static_cast<size_t>(p)];
    if (ps.outstanding > 0) {
      s += (s.empty() ? "" : ", ") + ("peer " + std::to_string(p)) + " (" + std::to_string(ps.outstanding) +
           " in flight)";
    }
  }
  return s.empty() ? "no operations outstanding" : "outstanding: " + s;
}

void Context::fence(int peer) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "fence");
  ++c.peer_stats[static_cast<size_t>(peer)].fences;
  TraceSpan span(c.trace.get(), "fence", "sync", peer);
  Deadline deadline(c.opt.op_timeout);
  c.drain(peer, deadline, "fence");
}

void Context::quiet() {
  impl_->check_owner("quiet");
  ++impl_->own_stats.quiets;
  TraceSpan span(impl_->trace.get(), "quiet", "sync");
  impl_->quiet(impl_->opt.op_timeout);
}

void Context::barrier() {
  impl_->check_owner("barrier");
  ++impl_->own_stats.barriers;
  TraceSpan span(impl_->trace.get(), "barrier", "sync");
  impl_->barrier(impl_->opt.op_timeout);
}

}  // namespace rwin

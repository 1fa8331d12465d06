// Peer liveness: failures learned from the bootstrap lease, and how messages name them.
#include <time.h>

#include <algorithm>
#include <cstdio>

#include "context_impl.h"
#include "ops.h"

namespace rwin {

using Clock = std::chrono::steady_clock;
using namespace detail;  // the core's internal types (context_impl.h, ops.h)

void ContextImpl::watch() {
  // Two clock reads per call at most; the bootstrap is asked every 2 ms (one non-blocking recv).
  const auto now = Clock::now();
  if (now < next_watch) return;
  next_watch = now + std::chrono::milliseconds(2);
  watch_now();
}

void ContextImpl::watch_now() {
  if (!bs) return;
  if (bs->caller_store() && tp) {
    // No lease tells us of a death: a peer whose connection the transport saw fail (UCX's error
    // callback on a closed socket, a verbs completion error) is a failed rank, named by that error.
    for (int p = 0; p < nranks; ++p) {
      if (p == rank || !peers[static_cast<size_t>(p)].failed.empty()) continue;
      std::string err = tp->peer_error(p);
      if (!err.empty()) bs->report_failure(p, std::move(err));
    }
  }
  bs->poll_failures();
  // Every failure the bootstrap knows, also those its own collectives learned (Bootstrap::barrier
  // polls the lease too): each peer enters known_failures once.
  for (const auto& f : bs->failures()) {
    if (f.rank < 0 || f.rank >= nranks || f.rank == rank) continue;
    if (std::any_of(known_failures.begin(), known_failures.end(), [&](const KnownFailure& k) { return k.rank == f.rank; })) {
      continue;
    }
    known_failures.push_back(KnownFailure{f.rank, f.how, f.when});
    degraded = true;
    const std::string text = "peer " + std::to_string(f.rank) + " failed (" + f.how + ")";
    if (trace) trace->instant("peer failed", "failure", f.rank, text);
    if (static_cast<size_t>(f.rank) < peers.size()) {
      PeerState& ps = peers[static_cast<size_t>(f.rank)];
      if (ps.failed.empty()) ps.failed = text;
    }
    if (tp) tp->fail_peer(f.rank, text);
  }
}

std::string ContextImpl::failure_text(int peer) const {
  for (const auto& f : known_failures) {
    if (f.rank != peer) continue;
    const double ago = std::chrono::duration<double>(Clock::now() - f.when).count();
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", ago);
    return "peer " + std::to_string(peer) + " failed (" + f.how + ", learned " + secs + " s ago)";
  }
  return {};
}

bool ContextImpl::learn_failure(int peer) {
  // An error path: the transport may see a peer's death (or its abandoning the job) a moment before
  // the store's news arrives; give the lease a moment, so the message names what really happened.
  watch_now();
  for (int i = 0; i < 200 && failure_text(peer).empty() && bs; ++i) {
    timespec ts{0, 1000 * 1000};
    nanosleep(&ts, nullptr);
    watch_now();
  }
  return !failure_text(peer).empty();
}

std::string ContextImpl::peer_failed_text(int peer, const std::string& detail) {
  learn_failure(peer);
  std::string s = failure_text(peer);
  if (s.empty()) {
    const std::string head = "peer " + std::to_string(peer) + " failed";
    s = detail.rfind(head, 0) == 0 ? detail : head + " (" + detail + ")";
  }
  // A survivor that left after an error looks dead too: name the failure that started it.
  if (!known_failures.empty() && known_failures.front().rank != peer) {
    s += "; first failure in the job: " + failure_text(known_failures.front().rank);
  }
  return s;
}

Error ContextImpl::store_error(const bootstrap::BootstrapError& e, const std::string& text) {
  if (e.kind() == bootstrap::BootstrapError::Kind::Connection && bs && !bs->caller_store() && rank != 0 && learn_failure(0)) {
    degraded = true;
    failures_reported = known_failures.size();  // reported here, as raise_new_failure does
    return Error(ErrorCode::PeerFailed, (text.empty() ? "" : text + ": ") + failure_text(0) + " (" + e.what() + ")");
  }
  watch_now();
  return Error(error_code(e), (text.empty() ? "" : text + ": ") + e.what());
}

void ContextImpl::raise_new_failure(const std::string& what) {
  if (failures_reported >= known_failures.size()) return;
  const KnownFailure& f = known_failures[failures_reported];
  failures_reported = known_failures.size();  // a wait reports each failure once (as ULFM does)
  throw Error(ErrorCode::PeerFailed, who() + ": " + failure_text(f.rank) + what);
}

void Context::fail_peer(int peer, const std::string& reason) {
  // Any thread: only immutable fields and the bootstrap's mailbox are touched here; the owning
  // thread's next watch() (every 2 ms in a wait) makes it a failure like a lease report.
  ContextImpl& c = *impl_;
  if (peer < 0 || peer >= c.nranks || peer == c.rank) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": fail_peer: peer " + std::to_string(peer) +
                                                " is not another rank of this job (0.." + std::to_string(c.nranks - 1) +
                                                ", not " + std::to_string(c.rank) + ")");
  }
  if (c.bs) c.bs->report_failure(peer, "fail_peer: " + (reason.empty() ? std::string("no reason given") : reason));
}

}  // namespace rwin

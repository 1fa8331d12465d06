// Collectives (arrival, allgather, barrier, point to point) over the TCP store.
//
// Key layout (one namespace per job, the store is private to it):
//   arrive/<rank>               set once by each rank in the constructor
//   ag/<seq>/<rank>             allgather contributions
//   bar/<seq>/<rank>            barrier arrivals
//   p2p/<tag>/<from>/<to>       send/recv payloads
// Liveness is not a key: each rank's lease (StoreLease) says goodbye in ~Bootstrap, and rank 0
// keeps serving until every other rank left or failed (TcpStoreServer::wait_until_ranks_left).
// Keys are never deleted: a bootstrap moves kilobytes per rank, and keeping them means a late
// reader can never miss a value. On a caller's store the same keys live under "rwin/<n>/".
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <thread>

#include "common/log.h"

namespace rwin::bootstrap {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  const size_t shown = std::min<size_t>(ranks.size(), 16);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > shown) s += " and " + std::to_string(ranks.size() - shown) + " more";
  return s;
}

std::vector<std::string> rank_keys(const std::string& prefix, int nranks) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) keys.push_back(prefix + std::to_string(r));
  return keys;
}

// Waits for `prefix<r>` for every rank r. On timeout, asks the store (over a fresh connection,
// the timed-out one is closed) which ranks are missing and throws a message naming them; if by
// then none is missing the wait simply succeeded at its deadline.
void wait_for_ranks(Store& store, const std::string& where, int rank, int nranks, const std::string& prefix,
                    const std::string& what, Millis budget, Millis reported, const char* missing_note) {
  const auto keys = rank_keys(prefix, nranks);
  try {
    store.wait(keys, budget);
  } catch (const BootstrapError& e) {
    const std::string head = "rank " + std::to_string(rank) + ": " + what + " at " + where;
    if (e.kind() != BootstrapError::Kind::Timeout) throw BootstrapError(e.kind(), head + " failed: " + e.what());
    std::string missing;
    try {
      const auto present = store.check(keys);
      std::vector<int> absent;
      for (int r = 0; r < nranks; ++r) {
        if (!present[static_cast<size_t>(r)]) absent.push_back(r);
      }
      if (absent.empty()) return;  // the last ones came just as the deadline passed
      missing = rank_list(absent) + " of " + std::to_string(nranks) + missing_note;
    } catch (const BootstrapError& e2) {
      missing = "ranks of " + std::to_string(nranks) + " (which ones is unknown: asking the store failed: " +
                e2.what() + ")";
    }
    throw BootstrapError(BootstrapError::Kind::Timeout,
                         head + " timed out after " + std::to_string(reported.count()) + " ms waiting for " + missing);
  }
}

// The caller's store as the bootstrap uses it: every key under this job's prefix, and blocking
// calls cut into slices so that a failure reported meanwhile (Bootstrap::report_failure) ends a wait
// for a rank that will never write. The caller's own store keeps no failure news of rwin's.
class CallerStore final : public Store {
 public:
  static constexpr Millis kSlice{100};
  CallerStore(std::shared_ptr<Store> inner, std::string prefix, std::function<bool()> failed)
      : inner_(std::move(inner)), prefix_(std::move(prefix)), failed_(std::move(failed)) {}
  void set(const std::string& key, std::span<const uint8_t> value) override { inner_->set(prefix_ + key, value); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(prefix_ + key, delta); }
  std::vector<bool> check(const std::vector<std::string>& keys) override { return inner_->check(prefixed(keys)); }
  Bytes get(const std::string& key, Millis timeout) override {
    return sliced(timeout, [&](Millis slice) { return inner_->get(prefix_ + key, slice); });
  }
  void wait(const std::vector<std::string>& keys, Millis timeout) override {
    const auto full = prefixed(keys);
    sliced(timeout, [&](Millis slice) {
      inner_->wait(full, slice);
      return 0;
    });
  }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  template <class F>
  auto sliced(Millis timeout, F&& call) -> decltype(call(Millis{})) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const auto left = std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
      try {
        return call(std::min(left, kSlice));
      } catch (const BootstrapError& e) {
        if (e.kind() != BootstrapError::Kind::Timeout) throw;
        if (failed_()) throw BootstrapError(BootstrapError::Kind::PeerFailed, "a rank failed while waiting");
        if (left <= kSlice) {
          throw BootstrapError(BootstrapError::Kind::Timeout, "timed out after " + std::to_string(timeout.count()) + " ms");
        }
      }
    }
  }

  std::shared_ptr<Store> inner_;
  std::string prefix_;
  std::function<bool()> failed_;
};

// True when every address `host` resolves to is a loopback address (127.0.0.0/8, ::1).
bool is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
  bool all_loopback = res != nullptr;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      all_loopback &= (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (ai->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      all_loopback &= IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) != 0;
    } else {
      all_loopback = false;
    }
  }
  freeaddrinfo(res);
  return all_loopback;
}

// Leaving after a failed start: say goodbye like ~Bootstrap does, and on rank 0 keep serving
// (bounded) until the ranks that did arrive have left, so their own diagnosis (which ranks are
// missing) still reaches the store.
void leave_after_failed_start(StoreLease* lease, TcpStoreServer* server, int rank, Millis timeout) {
  if (lease) lease->goodbye(std::min<Millis>(timeout, 2s));
  if (server) server->wait_until_ranks_left(rank, Clock::now() + std::min<Millis>(timeout, 10s));
}

std::string ago(Clock::time_point when) {
  const auto ms = std::chrono::duration_cast<Millis>(Clock::now() - when).count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s ago", static_cast<double>(std::max<int64_t>(ms, 0)) / 1000.0);
  return buf;
}

Millis left(Clock::time_point deadline) {
  return std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
}

}  // namespace

Bootstrap::Bootstrap(int rank, int nranks, const HostPort& root, Millis timeout, bool serve)
    : Bootstrap(rank, nranks, root, BootstrapConfig{timeout, timeout, std::string(), serve}) {}

Bootstrap::Bootstrap(int rank, int nranks, const HostPort& root, const BootstrapConfig& cfg)
    : Bootstrap(rank, nranks, root, cfg, nullptr) {}

Bootstrap::Bootstrap(int rank, int nranks, const HostPort& root, const BootstrapConfig& cfg,
                     std::unique_ptr<TcpStoreServer> served)
    : rank_(rank),
      nranks_(nranks),
      timeout_(std::max(Millis(0), cfg.op_timeout)),
      startup_timeout_(std::max(Millis(0), cfg.startup_timeout)),
      uncaught_at_start_(std::uncaught_exceptions()) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "bootstrap: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  }
  const std::string head = "rank " + std::to_string(rank) + ": bootstrap at " + root.str();
  if (root.port == 0 && !(nranks == 1 && cfg.serve)) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         head + ": port 0 (any free port) only works for a job of one rank; give the root a port");
  }
  if (cfg.job_key.empty() && !is_loopback_host(root.host)) {
    throw BootstrapError(
        BootstrapError::Kind::Config,
        head + ": the root '" + root.host +
            "' is not a loopback address, so the store would be reachable from the network, and this job has no "
            "key: set RWIN_JOB_KEY to the same secret on every rank (rwinrun does it itself; mpirun: "
            "mpirun -x RWIN_JOB_KEY=$(openssl rand -hex 32) ...; srun: export RWIN_JOB_KEY=$(openssl rand -hex 32) "
            "before srun)");
  }
  const auto deadline = Clock::now() + startup_timeout_;
  if (rank == 0 && served) {
    server_ = std::move(served);
  } else if (rank == 0 && cfg.serve) {
    try {
      server_ = std::make_unique<TcpStoreServer>(root.host, root.port, StoreServerConfig{cfg.job_key, nranks});
    } catch (const BootstrapError& e) {
      throw BootstrapError(e.kind(), head + ": cannot serve the store: " + e.what());
    }
  }
  Store* job = nullptr;
  HostPort connect_to = root;
  if (connect_to.port == 0) connect_to.port = server_->port();  // a job of one: our own server
  where_ = connect_to.str();
  const StoreClientConfig ccfg{cfg.job_key, rank, nranks, timeout_};
  try {
    // The lease first: a second process claiming this rank is refused here, before it can
    // touch any key.
    lease_ = std::make_unique<StoreLease>(connect_to, left(deadline), ccfg);
    auto s = std::make_unique<TcpStore>(connect_to, left(deadline), ccfg);
    job = s.get();
    store_ = std::move(s);
    const uint8_t none = 0;
    store_->set("arrive/" + std::to_string(rank), std::span<const uint8_t>(&none, 0));
  } catch (const BootstrapError& e) {
    // Leaving without a goodbye would report this rank failed; it never really joined.
    leave_after_failed_start(lease_.get(), nullptr, rank, timeout_);
    if (e.kind() == BootstrapError::Kind::Timeout) {
      throw BootstrapError(e.kind(), head + ": timed out after " + std::to_string(startup_timeout_.count()) +
                                         " ms (start-up timeout) joining the job, before any rank could be "
                                         "counted: " + e.what());
    }
    throw BootstrapError(e.kind(), head + ": " + e.what());
  }
  // The budget is what connecting left of the start-up timeout, but the message reports the
  // whole timeout: that is the number the user configured.
  try {
    wait_for_ranks(*job, where_, rank, nranks, "arrive/", "bootstrap", left(deadline), startup_timeout_,
                   " (never arrived)");
  } catch (const BootstrapError& e) {
    if (e.kind() == BootstrapError::Kind::PeerFailed) await_failure_event();
    leave_after_failed_start(lease_.get(), server_.get(), rank, timeout_);
    if (e.kind() == BootstrapError::Kind::PeerFailed && !failures_.empty()) {
      throw BootstrapError(BootstrapError::Kind::PeerFailed, head + ": " + failure_summary());
    }
    throw;
  }
}

Bootstrap::Bootstrap(int rank, int nranks, std::shared_ptr<Store> caller_store, const BootstrapConfig& cfg,
                     const std::string& where)
    : rank_(rank),
      nranks_(nranks),
      caller_store_(true),
      where_(where),
      timeout_(std::max(Millis(0), cfg.op_timeout)),
      startup_timeout_(std::max(Millis(0), cfg.startup_timeout)),
      uncaught_at_start_(std::uncaught_exceptions()) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "bootstrap: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  }
  const std::string head = "rank " + std::to_string(rank) + ": bootstrap on " + where;
  if (!caller_store) throw BootstrapError(BootstrapError::Kind::Config, head + ": no store given (a null pointer)");
  const auto deadline = Clock::now() + startup_timeout_;
  try {
    // Which of this rank's jobs on the store this is: the n-th Context of every rank meets the others'
    // n-th, and never reads keys an earlier job left.
    const int64_t n = caller_store->add("rwin/contexts/" + std::to_string(rank), 1);
    store_ = std::make_unique<CallerStore>(caller_store, "rwin/" + std::to_string(n) + "/", [this] {
      poll_failures();
      return !failures_.empty();
    });
    const uint8_t none = 0;
    store_->set("arrive/" + std::to_string(rank), std::span<const uint8_t>(&none, 0));
    wait_for_ranks(*store_, where_, rank, nranks, "arrive/", "bootstrap", left(deadline), startup_timeout_,
                   " (never arrived)");
  } catch (const BootstrapError& e) {
    if (e.kind() == BootstrapError::Kind::PeerFailed && !failures_.empty()) {
      throw BootstrapError(BootstrapError::Kind::PeerFailed, head + ": " + failure_summary());
    }
    const std::string msg = e.what();
    throw BootstrapError(e.kind(), msg.rfind("rank ", 0) == 0 ? msg : head + ": " + msg);
  }
}

Bootstrap::~Bootstrap() {
  // A rank unwinding from an error leaves without a goodbye: the others learn it failed.
  const bool unwinding = std::uncaught_exceptions() > uncaught_at_start_;
  try {
    if (lease_ && !unwinding) lease_->goodbye(std::min<Millis>(timeout_, 2s));
    if (server_) {
      // Others may still be reading keys (e.g. the last allgather): keep serving until every
      // live rank has said goodbye or failed, but never hold a finished job hostage for long.
      const Millis grace = std::min<Millis>(timeout_, 10s);
      if (!server_->wait_until_ranks_left(rank_, Clock::now() + grace)) {
        RWIN_LOG(Warn, Bootstrap,
                 "rwin bootstrap: rank %d: shutdown: some ranks neither left nor failed within %lld ms; "
                 "closing the store anyway",
                 rank_, static_cast<long long>(grace.count()));
      }
    }
  } catch (const std::exception& e) {
    RWIN_LOG(Warn, Bootstrap, "rwin bootstrap: %s; closing anyway", e.what());
  } catch (...) {
    RWIN_LOG(Warn, Bootstrap, "rwin bootstrap: rank %d: unknown error at shutdown; closing anyway", rank_);
  }
  store_.reset();
  lease_.reset();
  server_.reset();
}

std::vector<PeerFailure> Bootstrap::learn(std::vector<PeerFailure> news) {
  std::vector<PeerFailure> fresh;
  for (auto& f : news) {
    const bool known = std::any_of(failures_.begin(), failures_.end(), [&](const PeerFailure& k) { return k.rank == f.rank; });
    // (A failure naming this rank itself can only be "the store is gone" on a rank 0 that does
    // not serve: kept, it is news.)
    if (known) continue;
    failures_.push_back(f);
    fresh.push_back(std::move(f));
  }
  return fresh;
}

void Bootstrap::abandon_lease(const std::string& reason) noexcept {
  if (!lease_) return;
  const std::string why = reason.empty() ? "an error" : reason;
  lease_->goodbye(std::min<Millis>(timeout_, 1s), why.substr(0, wire::kMaxGoodbyeReason));
  lease_.reset();
}

std::vector<PeerFailure> Bootstrap::poll_failures() {
  std::vector<PeerFailure> news;
  if (lease_) news = lease_->poll();
  if (has_reported_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(reported_mu_);
    for (auto& f : reported_) news.push_back(std::move(f));
    reported_.clear();
    has_reported_.store(false, std::memory_order_relaxed);
  }
  if (news.empty()) return {};
  return learn(std::move(news));
}

void Bootstrap::report_failure(int rank, const std::string& how) noexcept {
  try {
    std::lock_guard<std::mutex> lock(reported_mu_);
    reported_.push_back(PeerFailure{rank, how, Clock::now()});
    has_reported_.store(true, std::memory_order_release);
  } catch (...) {
    // Out of memory: the failure is still found by the transport or at a deadline.
  }
}

std::string Bootstrap::failure_summary() const {
  std::string s;
  for (size_t i = 0; i < failures_.size() && i < 8; ++i) {
    const auto& f = failures_[i];
    s += (i ? "; " : "") + std::string("peer ") + std::to_string(f.rank) + " failed (" + f.how + ", learned " +
         ago(f.when) + ")";
  }
  if (failures_.size() > 8) s += " and " + std::to_string(failures_.size() - 8) + " more";
  return s;
}

// The store sends a failure event to the leases before it fails the parked requests, so the
// event is normally here already; a short wait covers scheduling between the two sockets.
bool Bootstrap::await_failure_event() {
  const auto until = Clock::now() + 200ms;
  for (;;) {
    poll_failures();
    if (!failures_.empty() || Clock::now() >= until) return !failures_.empty();
    std::this_thread::sleep_for(1ms);
  }
}

void Bootstrap::rethrow(const BootstrapError& e, const std::string& head) {
  if (e.kind() == BootstrapError::Kind::PeerFailed && await_failure_event()) {
    throw BootstrapError(e.kind(), head + ": " + failure_summary());
  }
  throw BootstrapError(e.kind(), head + ": " + e.what());
}

void Bootstrap::wait_ranks(const std::string& prefix, const char* what) {
  if (while_waiting_) {
    // Keep the caller's transport moving while the others come: a rank whose last send is still
    // queued in it (UCX over tcp sends only while progressed) would otherwise stall a peer that waits
    // for that send and so never arrives here.
    await_keys(rank_keys(prefix, nranks_), "rank " + std::to_string(rank_) + ": " + what + " at " + where_, timeout_,
               while_waiting_, false);
    return;
  }
  try {
    wait_for_ranks(*store_, where_, rank_, nranks_, prefix, what, timeout_, timeout_, "");
  } catch (const BootstrapError& e) {
    // wait_for_ranks already named this rank, the collective and the store.
    if (e.kind() != BootstrapError::Kind::PeerFailed || !await_failure_event()) throw;
    throw BootstrapError(e.kind(), "rank " + std::to_string(rank_) + ": " + what + ": " + failure_summary());
  }
}

std::vector<Bytes> Bootstrap::allgather(std::span<const uint8_t> mine) {
  const std::string prefix = "ag/" + std::to_string(seq_++) + "/";
  const std::string what = "allgather (" + prefix + ")";
  try {
    store_->set(prefix + std::to_string(rank_), mine);
  } catch (const BootstrapError& e) {
    rethrow(e, "rank " + std::to_string(rank_) + ": " + what);
  }
  wait_ranks(prefix, what.c_str());
  std::vector<Bytes> all(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) {
      all[static_cast<size_t>(r)].assign(mine.begin(), mine.end());
      continue;
    }
    try {
      all[static_cast<size_t>(r)] = store_->get(prefix + std::to_string(r), timeout_);
    } catch (const BootstrapError& e) {
      rethrow(e, "rank " + std::to_string(rank_) + ": " + what + " at " + where_ + " reading rank " +
                     std::to_string(r));
    }
  }
  return all;
}

void Bootstrap::barrier() {
  const std::string prefix = "bar/" + std::to_string(seq_++) + "/";
  const std::string what = "barrier (" + prefix + ")";
  try {
    const uint8_t none = 0;
    store_->set(prefix + std::to_string(rank_), std::span<const uint8_t>(&none, 0));
  } catch (const BootstrapError& e) {
    rethrow(e, "rank " + std::to_string(rank_) + ": " + what);
  }
  wait_ranks(prefix, what.c_str());
}

void Bootstrap::barrier(Millis timeout, const std::function<void()>& while_waiting, bool survivors_only) {
  const std::string prefix = "pbar/" + std::to_string(seq_++) + "/";
  const std::string who = "rank " + std::to_string(rank_) + ": barrier (" + prefix + ")";
  std::vector<std::string> keys;
  for (int r = 0; r < nranks_; ++r) keys.push_back(prefix + std::to_string(r));
  auto store_call = [&](auto&& call) {  // store failures name this barrier
    try {
      return call();
    } catch (const BootstrapError& e) {
      rethrow(e, who);
    }
  };
  const uint8_t none = 0;
  store_call([&] { store_->set(keys[static_cast<size_t>(rank_)], std::span<const uint8_t>(&none, 0)); });
  await_keys(keys, who, timeout, while_waiting, survivors_only);
}

void Bootstrap::await_keys(const std::vector<std::string>& keys, const std::string& who, Millis timeout,
                           const std::function<void()>& while_waiting, bool survivors_only) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto store_call = [&](auto&& call) {  // store failures name the collective
    try {
      return call();
    } catch (const BootstrapError& e) {
      rethrow(e, who);
    }
  };
  auto known_failed = [&](int r) {
    return std::any_of(failures_.begin(), failures_.end(), [r](const PeerFailure& f) { return f.rank == r; });
  };
  for (uint64_t round = 0;; ++round) {
    if (survivors_only) poll_failures();  // before the check: a rank failed after it arrived is not missing either
    const auto present = store_call([&] { return store_->check(keys); });
    std::string missing;
    std::vector<int> missing_ranks;
    int n_missing = 0;
    for (int r = 0; r < nranks_; ++r) {
      if (!present[static_cast<size_t>(r)] && !(survivors_only && known_failed(r))) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        missing_ranks.push_back(r);
        ++n_missing;
      }
    }
    if (missing.empty()) return;
    // A failed rank may be the one missing; it will not come (the rule the store applies to
    // parked waits).
    poll_failures();
    if (survivors_only && std::all_of(missing_ranks.begin(), missing_ranks.end(), known_failed)) return;
    // The answer above may predate a rank's arrival: a rank that arrived, saw everyone and then left
    // after an error of its own (a timed-out wait before the barrier) is reported failed right after.
    // Its set was answered before its lease closed, so asking once more tells the two apart.
    if (!survivors_only && !failures_.empty()) {
      const auto again = store_call([&] { return store_->check(keys); });
      if (std::all_of(again.begin(), again.end(), [](bool b) { return b; })) return;
      throw BootstrapError(BootstrapError::Kind::PeerFailed, who + " waiting for " +
                                                                 std::string(n_missing == 1 ? "rank " : "ranks ") +
                                                                 missing + ": " + failure_summary());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw BootstrapError(BootstrapError::Kind::Timeout, who + " timed out after " + std::to_string(timeout.count()) +
                                                              " ms waiting for " +
                                                              std::string(n_missing == 1 ? "rank " : "ranks ") +
                                                              missing + " of " + std::to_string(nranks_));
    }
    // Serve the peers often, ask the store (a TCP round trip) less often.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(round < 100 ? 50 : 1000);
    do {
      while_waiting();
    } while (std::chrono::steady_clock::now() < until);
  }
}

namespace {
void check_peer(int rank, int nranks, int peer, const char* op) {
  if (peer < 0 || peer >= nranks || peer == rank) {
    throw BootstrapError(BootstrapError::Kind::Config, "rank " + std::to_string(rank) + ": " + op + " peer " +
                                                           std::to_string(peer) + " is not another rank in [0, " +
                                                           std::to_string(nranks) + ")");
  }
}
}  // namespace

void Bootstrap::send(int peer, const std::string& tag, std::span<const uint8_t> data) {
  check_peer(rank_, nranks_, peer, "send to");
  const std::string key = "p2p/" + tag + "/" + std::to_string(rank_) + "/" + std::to_string(peer);
  try {
    store_->set(key, data);
  } catch (const BootstrapError& e) {
    rethrow(e, "rank " + std::to_string(rank_) + ": send to rank " + std::to_string(peer) + " tag '" + tag + "'");
  }
}

Bytes Bootstrap::recv(int peer, const std::string& tag) {
  check_peer(rank_, nranks_, peer, "recv from");
  const std::string key = "p2p/" + tag + "/" + std::to_string(peer) + "/" + std::to_string(rank_);
  try {
    return store_->get(key, timeout_);
  } catch (const BootstrapError& e) {
    const std::string head = "rank " + std::to_string(rank_) + ": recv from rank " + std::to_string(peer) + " tag '" +
                             tag + "' at " + where_;
    if (e.kind() == BootstrapError::Kind::Timeout) {
      throw BootstrapError(e.kind(), head + " timed out after " + std::to_string(timeout_.count()) + " ms (rank " +
                                         std::to_string(peer) + " never sent)");
    }
    rethrow(e, head);
  }
}

}  // namespace rwin::bootstrap

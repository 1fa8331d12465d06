// Collectives (arrival, allgather, barrier, point to point) over the TCP store.
//
// Key layout (one namespace per job, the store is private to it):
//   arrive/<rank>               set once by each rank in the constructor
//   ag/<seq>/<rank>             allgather contributions
//   bar/<seq>/<rank>            barrier arrivals
//   p2p/<tag>/<from>/<to>       send/recv payloads
//   exit/<rank>                 set in ~Bootstrap so rank 0 knows when the store may go
// Keys are never deleted: a bootstrap moves kilobytes per rank, and keeping them means a late
// reader can never miss a value.
#include "bootstrap/bootstrap.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>

namespace rwin::bootstrap {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// The job's store client plus the address it talks to, so collective errors can name it.
class JobStore final : public Store {
 public:
  JobStore(const HostPort& root, Millis connect_timeout) : root_(root), store_(root, connect_timeout) {}
  void set(const std::string& key, std::span<const uint8_t> value) override { store_.set(key, value); }
  Bytes get(const std::string& key, Millis timeout) override { return store_.get(key, timeout); }
  int64_t add(const std::string& key, int64_t delta) override { return store_.add(key, delta); }
  std::vector<bool> check(const std::vector<std::string>& keys) override { return store_.check(keys); }
  void wait(const std::vector<std::string>& keys, Millis timeout) override { store_.wait(keys, timeout); }
  const HostPort& root() const { return root_; }

 private:
  HostPort root_;
  TcpStore store_;
};

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
// the timed-out one is closed) which ranks are missing and throws a message naming them.
void wait_for_ranks(JobStore& store, int rank, int nranks, const std::string& prefix, const std::string& what,
                    Millis budget, Millis reported, const char* missing_note) {
  const auto keys = rank_keys(prefix, nranks);
  try {
    store.wait(keys, budget);
  } catch (const BootstrapError& e) {
    const std::string head = "rank " + std::to_string(rank) + ": " + what + " at " + store.root().str();
    if (e.kind() != BootstrapError::Kind::Timeout) throw BootstrapError(e.kind(), head + " failed: " + e.what());
    std::string missing;
    try {
      const auto present = store.check(keys);
      std::vector<int> absent;
      for (int r = 0; r < nranks; ++r) {
        if (!present[static_cast<size_t>(r)]) absent.push_back(r);
      }
      missing = rank_list(absent) + " of " + std::to_string(nranks) + missing_note;
    } catch (const BootstrapError& e2) {
      missing = "ranks of " + std::to_string(nranks) + " (which ones is unknown: " + e2.what() + ")";
    }
    throw BootstrapError(BootstrapError::Kind::Timeout,
                         head + " timed out after " + std::to_string(reported.count()) + " ms waiting for " + missing);
  }
}

// Loopback roots serve on the loopback address only; anything else must be reachable from other
// hosts, so serve on every interface (the root host may be a name that maps to one of several).
std::string bind_host_for(const HostPort& root) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(root.host.c_str(), nullptr, &hints, &res) == 0) {
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
    if (all_loopback) return root.host;
  }
  return root.host.find(':') != std::string::npos ? "::" : "0.0.0.0";
}

// A failed start still says goodbye like ~Bootstrap does: the ranks that did arrive ask the
// store which ranks are missing after their own timeout, so rank 0 keeps serving until each of
// them has set exit/<rank> (bounded), instead of pulling the store from under their diagnosis.
void leave_after_failed_start(JobStore& store, int rank, int nranks, bool serving, Millis timeout) {
  try {
    const uint8_t none = 0;
    store.set("exit/" + std::to_string(rank), std::span<const uint8_t>(&none, 0));
    if (!serving) return;
    const auto arrived = store.check(rank_keys("arrive/", nranks));
    std::vector<std::string> exits;
    for (int r = 0; r < nranks; ++r) {
      if (arrived[static_cast<size_t>(r)]) exits.push_back("exit/" + std::to_string(r));
    }
    store.wait(exits, std::min<Millis>(timeout, 10s));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rwin bootstrap: rank %d: leaving after a failed start: %s\n", rank, e.what());
  }
}

Millis left(Clock::time_point deadline) {
  return std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
}

}  // namespace

Bootstrap::Bootstrap(int rank, int nranks, const HostPort& root, Millis timeout, bool serve)
    : rank_(rank), nranks_(nranks), timeout_(timeout) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "bootstrap: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(nranks) + ")");
  }
  const std::string head = "rank " + std::to_string(rank) + ": bootstrap at " + root.str();
  if (root.port == 0 && !(nranks == 1 && serve)) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         head + ": port 0 (any free port) only works for a job of one rank; give the root a port");
  }
  const auto deadline = Clock::now() + timeout;
  if (rank == 0 && serve) {
    const std::string bind_host = bind_host_for(root);
    try {
      server_ = std::make_unique<TcpStoreServer>(bind_host, root.port);
    } catch (const BootstrapError& e) {
      throw BootstrapError(e.kind(), head + ": cannot serve the store: " + e.what());
    }
  }
  JobStore* job = nullptr;
  try {
    HostPort connect_to = root;
    if (connect_to.port == 0) connect_to.port = server_->port();  // a job of one: our own server
    auto s = std::make_unique<JobStore>(connect_to, left(deadline));
    job = s.get();
    store_ = std::move(s);
    const uint8_t none = 0;
    store_->set("arrive/" + std::to_string(rank), std::span<const uint8_t>(&none, 0));
  } catch (const BootstrapError& e) {
    throw BootstrapError(e.kind(), head + ": " + e.what());
  }
  // The budget is what connecting left of `timeout`, but the message reports the whole timeout:
  // that is the number the user configured.
  try {
    wait_for_ranks(*job, rank, nranks, "arrive/", "bootstrap", left(deadline), timeout, " (never arrived)");
  } catch (const BootstrapError&) {
    leave_after_failed_start(*job, rank, nranks, server_ != nullptr, timeout);
    throw;
  }
}

Bootstrap::~Bootstrap() {
  try {
    if (store_) {
      const uint8_t none = 0;
      store_->set("exit/" + std::to_string(rank_), std::span<const uint8_t>(&none, 0));
      if (server_) {
        // Others may still be reading keys (e.g. the last allgather): keep serving until every
        // rank has said goodbye, but never hold a finished job hostage for long.
        const Millis grace = std::min<Millis>(timeout_, 10s);
        wait_for_ranks(static_cast<JobStore&>(*store_), rank_, nranks_, "exit/", "shutdown", grace, grace,
                       " (still running or gone)");
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rwin bootstrap: %s; closing anyway\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "rwin bootstrap: rank %d: unknown error at shutdown; closing anyway\n", rank_);
  }
  store_.reset();
  server_.reset();
}

void Bootstrap::wait_ranks(const std::string& prefix, const char* what) {
  wait_for_ranks(static_cast<JobStore&>(*store_), rank_, nranks_, prefix, what, timeout_, timeout_, "");
}

std::vector<Bytes> Bootstrap::allgather(std::span<const uint8_t> mine) {
  const std::string prefix = "ag/" + std::to_string(seq_++) + "/";
  const std::string what = "allgather (" + prefix + ")";
  auto& job = static_cast<JobStore&>(*store_);
  try {
    store_->set(prefix + std::to_string(rank_), mine);
  } catch (const BootstrapError& e) {
    throw BootstrapError(e.kind(), "rank " + std::to_string(rank_) + ": " + what + ": " + e.what());
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
      throw BootstrapError(e.kind(), "rank " + std::to_string(rank_) + ": " + what + " at " + job.root().str() +
                                         " reading rank " + std::to_string(r) + ": " + e.what());
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
    throw BootstrapError(e.kind(), "rank " + std::to_string(rank_) + ": " + what + ": " + e.what());
  }
  wait_ranks(prefix, what.c_str());
}

void Bootstrap::barrier(Millis timeout, const std::function<void()>& while_waiting) {
  const std::string prefix = "pbar/" + std::to_string(seq_++) + "/";
  const std::string who = "rank " + std::to_string(rank_) + ": barrier (" + prefix + ")";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> keys;
  for (int r = 0; r < nranks_; ++r) keys.push_back(prefix + std::to_string(r));
  auto store_call = [&](auto&& call) {  // store failures name this barrier
    try {
      return call();
    } catch (const BootstrapError& e) {
      throw BootstrapError(e.kind(), who + ": " + e.what());
    }
  };
  const uint8_t none = 0;
  store_call([&] { store_->set(keys[static_cast<size_t>(rank_)], std::span<const uint8_t>(&none, 0)); });
  for (uint64_t round = 0;; ++round) {
    const auto present = store_call([&] { return store_->check(keys); });
    std::string missing;
    for (int r = 0; r < nranks_; ++r) {
      if (!present[static_cast<size_t>(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw BootstrapError(BootstrapError::Kind::Timeout, who + " timed out after " + std::to_string(timeout.count()) +
                                                              " ms waiting for ranks " + missing + " of " +
                                                              std::to_string(nranks_));
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
    throw BootstrapError(e.kind(), "rank " + std::to_string(rank_) + ": send to rank " + std::to_string(peer) +
                                       " tag '" + tag + "': " + e.what());
  }
}

Bytes Bootstrap::recv(int peer, const std::string& tag) {
  check_peer(rank_, nranks_, peer, "recv from");
  const std::string key = "p2p/" + tag + "/" + std::to_string(peer) + "/" + std::to_string(rank_);
  try {
    return store_->get(key, timeout_);
  } catch (const BootstrapError& e) {
    const std::string head = "rank " + std::to_string(rank_) + ": recv from rank " + std::to_string(peer) + " tag '" +
                             tag + "' at " + static_cast<JobStore&>(*store_).root().str();
    if (e.kind() == BootstrapError::Kind::Timeout) {
      throw BootstrapError(e.kind(), head + " timed out after " + std::to_string(timeout_.count()) + " ms (rank " +
                                         std::to_string(peer) + " never sent)");
    }
    throw BootstrapError(e.kind(), head + ": " + e.what());
  }
}

}  // namespace rwin::bootstrap

// Two ranks of rwin's own tcp transport in one process, connected over loopback: the fixture of the
// tcp unit tests (test_tcp_transport.cpp, test_tcp_congestion.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"
#include "env_guard.h"
#include "socket_util.h"

namespace rwin_tcp_test {

namespace tp = rwin::transport;
using namespace std::chrono_literals;

struct TcpRank {
  std::unique_ptr<rwin::bootstrap::Bootstrap> bs;
  std::unique_ptr<tp::Transport> t;
  std::unique_ptr<tp::MemoryRegion> window;
};

// Ranks 0 and 1 of a job of 2, connected, each with a 1 MiB window.
struct Pair {
  TcpRank r[2];
  std::unique_ptr<tp::RemoteKey> key_of_1;  // rank 1's window, as rank 0 sees it
  std::unique_ptr<tp::RemoteKey> key_of_0;
  static constexpr size_t kBytes = 1 << 20;
  size_t bytes = kBytes;  // each window's size

  explicit Pair(size_t window_bytes = kBytes) : bytes(window_bytes) {
    const uint16_t port = test_sock::free_port();
    const auto root = rwin::bootstrap::HostPort::parse("127.0.0.1:" + std::to_string(port));
    std::string errs[2];
    auto start = [&](int me) {
      try {
        r[me].bs = std::make_unique<rwin::bootstrap::Bootstrap>(me, 2, root, 20000ms);
        tp::TransportConfig cfg;
        cfg.name = "tcp";
        cfg.rank = me;
        cfg.nranks = 2;
        cfg.ifname = "lo";
        r[me].t = tp::make_transport(cfg);
        r[me].t->connect(*r[me].bs);
        r[me].window = r[me].t->allocate(bytes);
      } catch (const std::exception& e) {
        errs[me] = e.what();
      }
    };
    std::thread one(start, 1);
    start(0);
    one.join();
    if (!errs[0].empty() || !errs[1].empty()) throw std::runtime_error("start-up: " + errs[0] + " | " + errs[1]);
    key_of_1 = r[0].t->unpack_key(1, r[1].window->packed_key());
    key_of_0 = r[1].t->unpack_key(0, r[0].window->packed_key());
  }
  ~Pair() {
    for (auto& x : r) {
      if (x.t) x.t->quiesce(false);
    }
  }
  char* mem(int rank) const { return static_cast<char*>(r[rank].window->addr()); }
  uint64_t at1(size_t off) const { return key_of_1->base() + off; }

  // Rank 0 posts `w` to rank 1 with a cookie of its own (in w.cookie), and does not wait.
  tp::PostResult post(tp::Work& w) {
    w.peer = 1;
    w.rkey = w.op == tp::Op::Flush ? nullptr : key_of_1.get();
    w.cookie = ++cookie;
    return r[0].t->post(w);
  }
  // Rank 0 posts `w` to rank 1 and polls until its completion (bounded: 20 s).
  tp::Completion run(tp::Work w) {
    if (post(w) != tp::PostResult::Ok) return {w.cookie, false, "post: " + r[0].t->peer_error(1)};
    return wait(w.cookie);
  }
  // `rank` polls until the completion of `id` (bounded: 20 s); others found meanwhile are dropped.
  tp::Completion wait(uint64_t id, int rank = 0) {
    std::vector<tp::Completion> done;
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < until) {
      r[rank].t->poll(done);
      for (auto& c : done) {
        if (c.cookie == id) return c;
      }
      done.clear();
    }
    return {id, false, "no completion within 20 s"};
  }
  // Rank 0 polls until every one of `ids` completed, each successfully (bounded: 20 s).
  bool wait_all(std::vector<uint64_t> ids) {
    std::vector<tp::Completion> done;
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (!ids.empty() && std::chrono::steady_clock::now() < until) {
      r[0].t->poll(done);
      for (auto& c : done) {
        if (!c.ok) return false;
        std::erase(ids, c.cookie);
      }
      done.clear();
    }
    return ids.empty();
  }
  uint64_t cookie = 0;
};

inline tp::Work work(tp::Op op, void* local, uint64_t addr, size_t bytes, uint64_t operand = 0, uint64_t compare = 0) {
  return {.op = op, .local = local, .remote_addr = addr, .bytes = bytes, .operand = operand, .compare = compare};
}

// Rank 0 of 2 for a transport that never connect()s: it serves a connection handed to it with
// adopt_in_connection_for_fuzzing from its poll() (no bootstrap, listener or receiver thread).
inline tp::TransportConfig unconnected_config() {
  tp::TransportConfig cfg;
  cfg.name = "tcp";
  cfg.rank = 0;
  cfg.nranks = 2;
  cfg.ifname = "lo";
  return cfg;
}

// What making such a transport throws with `knob`=`value` in the environment ("" if it was made).
inline std::string start_up_error(const char* knob, const std::string& value) {
  rwin::test::EnvGuard env;
  env.set(knob, value.c_str());
  try {
    (void)tp::make_transport(unconnected_config());
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace rwin_tcp_test

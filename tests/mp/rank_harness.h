// Multi-process test harness: forks N ranks that meet through the TCP store on 127.0.0.1.
//
// Each child sets the transport's environment (e.g. UCX_TLS), builds its own rwin::Context from
// explicit options, runs the body and exits 0, or prints what failed and exits 1. The parent
// collects every child's output and kills all of them at the deadline, so no test can hang.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "rwin/rwin.h"
#include "tests/unit/socket_util.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace rwin_test {

// A check that works inside a forked rank (GoogleTest assertions do not cross fork()).
#define MP_CHECK(cond, msg)                                                                       \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::ostringstream mp_check_os_;                                                            \
      mp_check_os_ << __FILE__ << ":" << __LINE__ << ": check failed: " #cond ": " << msg;       \
      throw std::runtime_error(mp_check_os_.str());                                               \
    }                                                                                             \
  } while (0)

// A pipe made before the ranks fork, so that one rank can make another wait outside rwin.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe(fd) != 0) throw std::runtime_error("pipe failed");
  }
  ~Pipe() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void put_byte() const { MP_CHECK(::write(fd[1], "x", 1) == 1, "pipe write"); }
  // Blocks outside rwin until another process wrote a byte (60 s at most).
  bool await_byte() const {
    pollfd pf{fd[0], POLLIN, 0};
    char b = 0;
    return ::poll(&pf, 1, 60000) == 1 && ::read(fd[0], &b, 1) == 1;
  }
};

// Expects `stmt` to throw rwin::Error with `code` and a message containing every `parts` string.
template <class F>
void expect_error(F&& stmt, rwin::ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    stmt();
  } catch (const rwin::Error& e) {
    MP_CHECK(e.code() == code, "wrong code " << rwin::to_string(e.code()) << " (wanted " << rwin::to_string(code)
                                             << "): " << e.what());
    const std::string what = e.what();
    for (const auto& p : parts) MP_CHECK(what.find(p) != std::string::npos, "message lacks '" << p << "': " << what);
    return;
  }
  MP_CHECK(false, "no rwin::Error thrown (wanted " << rwin::to_string(code) << ")");
}

struct TransportParam {
  std::string name;  // test-name suffix
  std::string transport;
  std::vector<std::pair<std::string, std::string>> env;
  // Whether traffic to a dead peer fails. Over shared memory it need not: the peer's segment
  // stays mapped in our process, so a get still reads its (last) contents.
  bool detects_dead_peer = true;
  // > 0: rank r runs as if on host r % hosts (RWIN_HOST_ID), so the mixed transport reaches some peers
  // through UCX's shared memory and the others through rwin's tcp, on one machine.
  int hosts = 0;
};

// The CI tier (RWIN_TEST_TIER=ci, tests/run-all.sh's default, which also reaches the soft-RoCE guest)
// runs fewer trials of the same kinds of test: it has a 30-minute budget (README.md). Unset (a test
// binary run by hand) or `full` (`tests/run-all.sh --full`): every trial.
inline bool ci_tier() {
  const char* tier = std::getenv("RWIN_TEST_TIER");
  return tier != nullptr && std::strcmp(tier, "ci") == 0;
}
// How many rounds a stress test runs: `full`, or `ci` in the CI tier.
inline int trials(int full, int ci) { return ci_tier() ? ci : full; }

// GoogleTest prints parameters in test names and ctest listings: the name says it all.
inline void PrintTo(const TransportParam& p, std::ostream* os) { *os << p.name; }

inline std::vector<TransportParam> transports() {
  return {
      {"ucx_tcp", "ucx", {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}}, true},
      {"ucx_tcp_native", "ucx", {{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}, {"RWIN_UCX_RMA", "native"}}, true},
      {"ucx_shm", "ucx", {{"UCX_TLS", "posix,sysv,self"}}, false},
      {"ucx_shm_native", "ucx", {{"UCX_TLS", "posix,sysv,self"}, {"RWIN_UCX_RMA", "native"}}, false},
      {"tcp", "tcp", {{"RWIN_IFNAME", "lo"}}, true},  // rwin's own sockets (transport/tcp)
      // The same with three connections per pair and every Write of 4 KiB or more striped over them
      // (RWIN_TCP_SOCKETS): notifies, flushes and gets wait at the target for every stripe before them.
      {"tcp_striped", "tcp", {{"RWIN_IFNAME", "lo"}, {"RWIN_TCP_SOCKETS", "3"}, {"RWIN_TCP_STRIPE_MIN", "4K"}}, true},
      // UCX's shared memory to the ranks of the same parity, rwin's tcp to the others (transport/mixed):
      // every ring neighbour is on the "other host".
      {"mixed", "mixed", {{"UCX_TLS", "posix,sysv,self"}, {"RWIN_IFNAME", "lo"}}, false, 2},
      // The same with striping on its tcp side: lanes only to the other host's ranks.
      {"mixed_striped", "mixed",
       {{"UCX_TLS", "posix,sysv,self"}, {"RWIN_IFNAME", "lo"}, {"RWIN_TCP_SOCKETS", "3"}, {"RWIN_TCP_STRIPE_MIN", "4K"}}, false, 2},
      {"verbs", "verbs", {}, true},
  };
}

// Verbs needs an RDMA device (soft-RoCE in the guest); elsewhere those tests skip with a reason.
inline bool have_rdma_device() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

inline std::string skip_reason(const TransportParam& p) {
  if (p.transport == "verbs" && !have_rdma_device()) {
    return "no RDMA device (/sys/class/infiniband is empty); run under tests/rxe/run-in-guest.sh";
  }
  return {};
}

struct RankResult {
  int status = -1;       // exit status, or 128 + signal
  std::string output;    // stdout + stderr
};

struct RunResult {
  std::vector<RankResult> ranks;
  bool timed_out = false;
  bool all_ok() const {
    if (timed_out) return false;
    for (const auto& r : ranks) {
      if (r.status != 0) return false;
    }
    return true;
  }
  std::string report() const {
    std::string s = timed_out ? "TIMED OUT (children killed)\n" : "";
    for (size_t i = 0; i < ranks.size(); ++i) {
      s += "--- rank " + std::to_string(i) + " status " + std::to_string(ranks[i].status) + "\n" + ranks[i].output;
    }
    return s;
  }
};

// Options a rank body starts from: explicit rank/size/root, the transport, short deadlines.
inline rwin::Options rank_options(int rank, int n, const std::string& root, const TransportParam& p) {
  rwin::Options o;
  o.rank = rank;
  o.nranks = n;
  o.root = root;
  o.transport = p.transport;
  o.startup_timeout = std::chrono::milliseconds(30000);
  o.op_timeout = std::chrono::milliseconds(30000);
  return o;
}

using RankBody = std::function<void(int rank, int nranks, const std::string& root)>;

// Runs `body` in `n` forked processes (only ranks in `spawn`, default all) and collects results.
inline RunResult run_ranks(int n, const TransportParam& p, const RankBody& body,
                           std::chrono::seconds timeout = std::chrono::seconds(120),
                           std::vector<int> spawn = {}) {
  if (spawn.empty()) {
    for (int r = 0; r < n; ++r) spawn.push_back(r);
  }
  const test_sock::ReservedPort port;  // held until every rank is done (tests/unit/socket_util.h)
  if (port.port() == 0) throw std::runtime_error("run_ranks: cannot bind 127.0.0.1:0 for the root");
  const std::string root = "127.0.0.1:" + std::to_string(port.port());
  RunResult res;
  res.ranks.resize(static_cast<size_t>(n));
  std::vector<pid_t> pids(static_cast<size_t>(n), -1);
  std::vector<int> fds(static_cast<size_t>(n), -1);
  std::fflush(nullptr);
  for (int r : spawn) {
    int pfd[2];
    if (::pipe(pfd) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pfd[0]);
      ::dup2(pfd[1], 1);
      ::dup2(pfd[1], 2);
      ::close(pfd[1]);
      for (const auto& [k, v] : p.env) ::setenv(k.c_str(), v.c_str(), 1);
      if (p.hosts > 0) ::setenv("RWIN_HOST_ID", ("testhost" + std::to_string(r % p.hosts)).c_str(), 1);
      int code = 0;
      try {
        body(r, n, root);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d failed: %s\n", r, e.what());
        code = 1;
      }
#if defined(__SANITIZE_ADDRESS__)
      // _exit skips LeakSanitizer's at-exit check: run it here so a leak in a rank fails the test.
      if (__lsan_do_recoverable_leak_check() != 0 && code == 0) code = 1;
#endif
      std::fflush(nullptr);
      ::_exit(code);
    }
    ::close(pfd[1]);
    ::fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    pids[static_cast<size_t>(r)] = pid;
    fds[static_cast<size_t>(r)] = pfd[0];
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t open = spawn.size();
  while (open > 0) {
    std::vector<pollfd> pf;
    std::vector<int> who;
    for (int r = 0; r < n; ++r) {
      if (fds[static_cast<size_t>(r)] >= 0) {
        pf.push_back({fds[static_cast<size_t>(r)], POLLIN, 0});
        who.push_back(r);
      }
    }
    ::poll(pf.data(), pf.size(), 100);
    for (size_t i = 0; i < pf.size(); ++i) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t k = ::read(pf[i].fd, buf, sizeof buf);
      if (k > 0) {
        res.ranks[static_cast<size_t>(who[i])].output.append(buf, static_cast<size_t>(k));
      } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
        ::close(pf[i].fd);
        fds[static_cast<size_t>(who[i])] = -1;
        --open;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      res.timed_out = true;
      for (pid_t pid : pids) {
        if (pid > 0) ::kill(pid, SIGKILL);
      }
      break;
    }
  }
  for (int r = 0; r < n; ++r) {
    if (fds[static_cast<size_t>(r)] >= 0) ::close(fds[static_cast<size_t>(r)]);
    const pid_t pid = pids[static_cast<size_t>(r)];
    if (pid <= 0) continue;
    int st = 0;
    ::waitpid(pid, &st, 0);
    res.ranks[static_cast<size_t>(r)].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  return res;
}

// The fixture of the suites parameterised over transports (test_contract.cpp, test_memory_model.cpp):
// skips a transport this machine lacks; run() gives each of `n` ranks a ready Context.
class TransportSuite : public ::testing::TestWithParam<TransportParam> {
 protected:
  void SetUp() override {
    const std::string why = skip_reason(GetParam());
    if (!why.empty()) GTEST_SKIP() << "skipped: " << why;
  }
  // `overrides`: chunk_bytes, pipeline_depth, op_timeout and accumulate_staging_bytes, where set, replace rank_options'.
  void run(int n, const std::function<void(rwin::Context&)>& body, rwin::Options overrides = {}) {
    const TransportParam p = GetParam();
    auto res = run_ranks(n, p, [&](int rank, int nranks, const std::string& root) {
      rwin::Options o = rank_options(rank, nranks, root, p);
      if (overrides.chunk_bytes) o.chunk_bytes = overrides.chunk_bytes;
      if (overrides.pipeline_depth) o.pipeline_depth = overrides.pipeline_depth;
      if (overrides.op_timeout.count()) o.op_timeout = overrides.op_timeout;
      if (overrides.accumulate_staging_bytes) o.accumulate_staging_bytes = overrides.accumulate_staging_bytes;
      rwin::Context ctx(o);
      body(ctx);
    });
    ASSERT_TRUE(res.all_ok()) << res.report();
  }
};

}  // namespace rwin_test

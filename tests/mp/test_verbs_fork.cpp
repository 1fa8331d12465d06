// Fork and the verbs transport (docs/CONFIG.md, RWIN_IB_FORK_SAFE), in the two patterns the runtime
// meets:
//  1. A parent that has opened nothing of verbs forks one worker per rank; each worker makes its own
//     Context and runs a ring shift (the gtest process only looks at sysfs, never at libibverbs).
//  2. A process with a verbs transport and registered memory forks a child. The child writes its
//     copy of the registered page and then tears its inherited transport down as any C++ program
//     would (destructors). The parent's QP and MR keep working, and the NIC and the parent's CPU see
//     the same bytes: RDMA reads return what the CPU wrote after the fork, RDMA writes are what the
//     CPU reads, and the child's writes are nowhere.
// Needs an RDMA device: tests/rxe/run-in-guest.sh build/bin/rwin_mp_tests --gtest_filter='VerbsFork*'
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "rank_harness.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_device.h"
#include "verbs_test_util.h"

namespace {

using namespace std::chrono_literals;
using rwin_test::run_ranks;
using rwin_test::TransportParam;
namespace rt = rwin::transport;

TransportParam verbs_param(std::vector<std::pair<std::string, std::string>> env = {}) {
  return {"verbs", "verbs", std::move(env), true};
}

// Pattern 1. RWIN_IB_FORK_SAFE=1 in the workers: ibv_fork_init() in a child whose parent registered
// nothing must succeed (or be unneeded).
void ring_worker(int r, int n, const std::string& root) {
  rwin::Options o = rwin_test::rank_options(r, n, root, verbs_param());
  rwin::Context ctx(o);
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  auto src = ctx.alloc_window("src", rwin::DType::I64, {1, 512});
  auto dst = ctx.alloc_window("dst", rwin::DType::I64, {1, 512});
  auto sig = ctx.alloc_signals("sig", 1);
  for (int i = 0; i < 512; ++i) src.data_as<int64_t>()[i] = r * 100000 + i;
  ctx.put(dst.all(), next, src.all());
  ctx.notify(sig.at(0), next, 1);
  ctx.wait(sig.at(0), 1, rwin::WaitCmp::GE);
  for (int i = 0; i < 512; ++i) {
    MP_CHECK(dst.data_as<int64_t>()[i] == prev * 100000 + i, "rank " << r << " dst[" << i << "] = "
                                                                     << dst.data_as<int64_t>()[i]);
  }
  ctx.barrier();
}

TEST(VerbsFork, WorkersOfAParentWithoutVerbsEachMakeTheirOwnContext) {
  if (!rwin_test::have_rdma_device()) GTEST_SKIP() << rwin::test::verbs::kSkip;
  for (const char* mode : {"auto", "1"}) {
    SCOPED_TRACE(std::string("RWIN_IB_FORK_SAFE=") + mode);
    const auto res = run_ranks(3, verbs_param({{"RWIN_IB_FORK_SAFE", mode}}), ring_worker, 120s);
    EXPECT_TRUE(res.all_ok()) << res.report();
  }
}

// One Work to completion (polling, 60 s deadline); throws with the completion's error.
void run(rt::Transport& t, rt::Work w) {
  static uint64_t cookie = 0;
  w.cookie = ++cookie;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::vector<rt::Completion> got;
  while (t.post(w) != rt::PostResult::Ok) {
    MP_CHECK(t.peer_error(w.peer).empty(), "post: " << t.peer_error(w.peer));
    t.poll(got);
    MP_CHECK(std::chrono::steady_clock::now() < deadline, "post stayed Busy for 60 s");
  }
  for (;;) {
    t.poll(got);
    for (const auto& c : got) {
      MP_CHECK(c.ok, c.error);
      if (c.cookie == w.cookie) return;
    }
    got.clear();
    MP_CHECK(std::chrono::steady_clock::now() < deadline, rt::op_name(w.op) << " did not complete in 60 s");
  }
}

bool all_bytes(const void* p, size_t n, uint8_t v) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != v) return false;
  }
  return true;
}

// Pattern 2, in a process of its own (forked by run_ranks, so the gtest process stays verbs-free
// and the fork-safety state of libibverbs starts fresh).
void parent_with_registered_memory(int, int, const std::string&) {
  constexpr size_t kBytes = 4096;
  rt::TransportConfig cfg;
  cfg.name = "verbs";
  if (const char* dev = std::getenv("RWIN_RXE_DEV")) cfg.ib_device = dev;
  cfg.dynamic_peers = true;
  cfg.verbs = rt::VerbsParams::from_env();
  auto t = rt::make_transport(cfg);
  const int self = t->add_peer();
  t->connect_peer(self, t->local_endpoint(self));  // loopback QP: the NIC reads and writes our pages
  auto win = t->allocate(kBytes);
  auto buf = t->allocate(kBytes);
  auto key = t->unpack_key(self, win->packed_key());
  const uint64_t base = key->base();
  std::memset(buf->addr(), 0x22, kBytes);
  run(*t, write_work(self, buf->addr(), buf.get(), base, key.get(), kBytes));
  MP_CHECK(all_bytes(win->addr(), kBytes, 0x22), "rdma write before the fork not seen by the CPU");
  const std::string fork_state = rt::verbs::fork_status_text();
  // ibv_fork_init() with RDMAV_USE_MADVISE: registered pages are MADV_DONTFORK (no copy in the child)
  // even where the kernel would copy them (ibv_is_fork_initialized() then still says "unneeded").
  const bool dontfork = std::getenv("RDMAV_USE_MADVISE") != nullptr && cfg.verbs.fork_safe != rt::ForkSafe::Off;

  int go[2];
  MP_CHECK(::pipe(go) == 0, "pipe");
  std::fflush(nullptr);
  const pid_t child = ::fork();
  MP_CHECK(child >= 0, "fork: " << std::strerror(errno));
  if (child == 0) {
    ::close(go[1]);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(10);
    // The child's copy is the page as it was at fork; under MADV_DONTFORK there is no page at all
    // (mincore: ENOMEM; touching it would be SIGSEGV), and no teardown either: its heap chunk
    // headers border pages the child does not have.
    auto* p = static_cast<uint8_t*>(win->addr());
    unsigned char resident[1];
    if (::mincore(p, kBytes, resident) != 0) ::_exit(errno == ENOMEM ? 20 : 13);
    if (!all_bytes(p, kBytes, 0x22)) ::_exit(11);
    std::memset(p, 0x33, kBytes);
    if (!all_bytes(p, kBytes, 0x33)) ::_exit(12);
    // Tear the inherited transport down as a program leaving main would. This must not reach the
    // parent's objects through the device file both processes share.
    key.reset();
    win.reset();
    buf.reset();
    t.reset();
    ::_exit(0);
  }
  ::close(go[0]);
  // The parent writes the registered page while the child holds a copy-on-write mapping of it: on
  // a kernel that neither copies pinned pages at fork nor has ibv_fork_init() in force, this write
  // moves the parent to a new page and the NIC keeps the old one.
  std::memset(win->addr(), 0x44, kBytes);
  std::memset(buf->addr(), 0, kBytes);
  run(*t, read_work(self, buf->addr(), buf.get(), base, key.get(), kBytes));
  MP_CHECK(all_bytes(buf->addr(), kBytes, 0x44), "after fork: the NIC read other bytes than the parent's CPU wrote ("
                                                     << fork_state << ")");
  MP_CHECK(::write(go[1], "g", 1) == 1, "pipe write");
  ::close(go[1]);
  int st = 0;
  MP_CHECK(::waitpid(child, &st, 0) == child, "waitpid");
  if (dontfork) {
    MP_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 20,
             "MADV_DONTFORK: the child should have no copy of the registered page, status " << st);
  } else {
    // The kernel copies pinned pages into the child (exit 0), or libibverbs marked them
    // MADV_DONTFORK at registration (exit 20: seen in the guest with rdma-core 44 on 6.1 even where
    // the kernel reports copy-on-fork). Either keeps the parent's pages its own.
    MP_CHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 20),
             "child failed: status " << st << " (" << fork_state << ")");
    std::printf("child of a verbs process: %s\n", WEXITSTATUS(st) == 0 ? "had a copy of the registered page"
                                                                        : "had no copy (MADV_DONTFORK)");
  }
  // After the child wrote its copy and destroyed its inherited transport: the parent's QP and MR.
  MP_CHECK(all_bytes(win->addr(), kBytes, 0x44), "the child's writes reached the parent's page");
  std::memset(buf->addr(), 0x55, kBytes);
  run(*t, write_work(self, buf->addr(), buf.get(), base, key.get(), kBytes));
  MP_CHECK(all_bytes(win->addr(), kBytes, 0x55), "rdma write after the child exited not seen by the parent's CPU");
  std::memset(win->addr(), 0x66, kBytes);
  run(*t, read_work(self, buf->addr(), buf.get(), base, key.get(), kBytes));
  MP_CHECK(all_bytes(buf->addr(), kBytes, 0x66), "rdma read after the child exited: not the parent's bytes");
  std::printf("fork state: %s%s\n", fork_state.c_str(), dontfork ? ", MADV_DONTFORK (RDMAV_USE_MADVISE)" : "");
}

TEST(VerbsFork, ParentMemoryStaysCorrectWhenAChildWritesItsCopyAndTearsDown) {
  if (!rwin_test::have_rdma_device()) GTEST_SKIP() << rwin::test::verbs::kSkip;
  // auto: the kernel's copy-on-fork (6.1: unneeded). RDMAV_USE_MADVISE=1 with RWIN_IB_FORK_SAFE=1:
  // ibv_fork_init()'s MADV_DONTFORK as on a kernel older than 5.13 (the child gets no copy).
  for (const auto& env : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"RWIN_IB_FORK_SAFE", "auto"}}, {{"RWIN_IB_FORK_SAFE", "1"}, {"RDMAV_USE_MADVISE", "1"}}}) {
    SCOPED_TRACE(env.back().first + "=" + env.back().second);
    const auto res = run_ranks(1, verbs_param(env), parent_with_registered_memory, 120s);
    EXPECT_TRUE(res.all_ok()) << res.report();
    std::printf("%s", res.ranks[0].output.c_str());
  }
}

}  // namespace

// A job started on a store the caller brings (issue 25 items 1 and 2): rwin::Context(store, rank,
// nranks) with no RWIN_* variable, no rwinrun, no rwin store server or listening port, and a rank
// killed mid-job named by every survivor through fail_peer from a heartbeat the test runs itself.
// The store here is the caller's own: files in a directory (set = write + rename, add under flock),
// shared by forked ranks, as a runtime's store would be shared by its workers.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "rank_harness.h"
#include "rwin/collectives.h"

using namespace rwin;
using rwin_test::expect_error;
using rwin_test::TransportParam;
namespace fs = std::filesystem;
using Ms = std::chrono::milliseconds;

namespace {

// The caller's store: one file per key (the key hex-encoded), visible to every process on the host.
class FileStore final : public rwin::Store {
 public:
  explicit FileStore(fs::path dir) : dir_(std::move(dir)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    const fs::path tmp = file(key).string() + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(value.data()), static_cast<std::streamsize>(value.size()));
      if (!out) throw std::runtime_error("FileStore: cannot write " + tmp.string());
    }
    fs::rename(tmp, file(key));  // readers see the whole value or nothing
  }
  std::optional<std::vector<uint8_t>> get(const std::string& key, Ms timeout) override {
    if (!wait({key}, timeout)) return std::nullopt;
    std::ifstream in(file(key), std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  int64_t add(const std::string& key, int64_t delta) override {
    const std::string lock = file(key).string() + ".lock";
    const int fd = ::open(lock.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) throw std::runtime_error("FileStore: cannot lock " + lock);
    int64_t v = 0;
    if (fs::exists(file(key))) {
      std::ifstream in(file(key));
      in >> v;
    }
    v += delta;
    const std::string text = std::to_string(v);
    try {
      set(key, std::vector<uint8_t>(text.begin(), text.end()));
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);  // releases the lock
    return v;
  }
  bool check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (!fs::exists(file(k))) return false;
    }
    return true;
  }
  bool wait(const std::vector<std::string>& keys, Ms timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!check(keys)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(Ms(1));
    }
    return true;
  }
  int64_t calls_with_prefix_count(const std::string& prefix) const {  // keys rwin wrote under `prefix`
    int64_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.find('.') == std::string::npos && unhex(name).rfind(prefix, 0) == 0) ++n;
    }
    return n;
  }

 private:
  fs::path file(const std::string& key) const {
    static const char* digits = "0123456789abcdef";
    std::string name;
    for (unsigned char ch : key) name += {digits[ch >> 4], digits[ch & 15]};
    return dir_ / name;
  }
  static std::string unhex(const std::string& h) {
    std::string s;
    for (size_t i = 0; i + 1 < h.size(); i += 2) s += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    return s;
  }
  fs::path dir_;
};

fs::path fresh_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("rwin-store-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Every launcher and RWIN_* variable out of the child's environment: the store is all it has.
void clear_launch_env() {
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (name.rfind("RWIN_", 0) == 0 || name.rfind("OMPI_", 0) == 0 || name.rfind("PMI", 0) == 0 ||
        name.rfind("SLURM_", 0) == 0) {
      names.push_back(name);
    }
  }
  for (const auto& n : names) ::unsetenv(n.c_str());
}

// Inodes of the TCP sockets in LISTEN state on this host (IPv4 and IPv6).
std::set<std::string> listening_inodes() {
  std::set<std::string> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode;
      if (st == "0A") out.insert(inode);
    }
  }
  return out;
}

// How many of this process's file descriptors are listening TCP sockets.
int own_listening_sockets() {
  const auto listening = listening_inodes();
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (ec || target.rfind("socket:[", 0) != 0) continue;
    if (listening.count(target.substr(8, target.size() - 9))) ++n;
  }
  return n;
}

Options store_options(const TransportParam& p) {
  Options o;
  o.transport = p.transport;
  o.startup_timeout = Ms(30000);
  o.op_timeout = Ms(30000);
  return o;
}

// The test's own run_ranks use: the root it hands out is ignored (no rwin store is served).
rwin_test::RunResult run_on_store(int n, const TransportParam& p, const fs::path& dir,
                                  const std::function<void(Context&, FileStore&)>& body) {
  return rwin_test::run_ranks(n, p, [&](int rank, int nranks, const std::string&) {
    clear_launch_env();
    auto store = std::make_shared<FileStore>(dir);
    Context ctx(store, rank, nranks, store_options(p));
    body(ctx, *store);
  });
}

using CallerStore = rwin_test::TransportSuite;

// Three ranks on the caller's store: put/get, notify/wait, an allreduce and a fetch_add from every
// rank, with no RWIN_* variable set; the bootstrap opened no listening socket (over UCX's tcp, UCX
// listens for its own connections: that one is the transport's, so it is not counted there).
TEST_P(CallerStore, ThreeRanksRunPutGetNotifyAllreduceAndAtomicsWithNoRwinVariable) {
  const TransportParam p = GetParam();
  const fs::path dir = fresh_dir("three");
  const bool ucx_tcp = p.name.find("tcp") != std::string::npos;
  auto res = run_on_store(3, p, dir, [&](Context& ctx, FileStore&) {
    const int n = ctx.size(), me = ctx.rank();
    MP_CHECK(n == 3, "size " << n);
    MP_CHECK(ctx.options().bootstrap == "store", "bootstrap " << ctx.options().bootstrap);
    MP_CHECK(ctx.options().root.empty(), "a root was set: " << ctx.options().root);
    if (!ucx_tcp) MP_CHECK(own_listening_sockets() == 0, own_listening_sockets() << " listening sockets");
    Window w = ctx.alloc_window("w", DType::I64, {1, 64});
    Window got = ctx.alloc_window("got", DType::I64, {1, 64});
    Window counter = ctx.alloc_window("counter", DType::I64, {1, 1});
    SignalArray sig = ctx.alloc_signals("sig", 1);
    std::vector<int64_t> mine(64);
    for (int i = 0; i < 64; ++i) mine[static_cast<size_t>(i)] = me * 1000 + i;
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    ctx.put(w.all(), right, rwin::local(mine.data(), {1, 64}));
    ctx.notify(sig.at(0), right, 1);
    ctx.wait(sig.at(0), 1);
    for (int i = 0; i < 64; ++i) {
      MP_CHECK(w.data_as<int64_t>()[i] == left * 1000 + i, "ring element " << i << ": " << w.data_as<int64_t>()[i]);
    }
    ctx.barrier();
    ctx.get(got.all(), right, w.all());  // right's window holds my data
    for (int i = 0; i < 64; ++i) MP_CHECK(got.data_as<int64_t>()[i] == me * 1000 + i, "get element " << i);
    ctx.barrier();  // over UCX am a get is served by its target's progress: no allocation before all are done
    Window x = ctx.alloc_window("x", DType::F32, {1, 16});
    for (int i = 0; i < 16; ++i) x.data_as<float>()[i] = static_cast<float>(me + 1) * static_cast<float>(i);
    Team team = world(ctx);
    team.allreduce(x);
    for (int i = 0; i < 16; ++i) MP_CHECK(x.data_as<float>()[i] == 6.0f * static_cast<float>(i), "allreduce " << i);
    std::set<int64_t> tickets;
    for (int i = 0; i < 5; ++i) tickets.insert(ctx.fetch_add(counter.all(), 0, 1));
    MP_CHECK(tickets.size() == 5, "a ticket twice");
    ctx.barrier();
    if (me == 0) MP_CHECK(counter.data_as<int64_t>()[0] == 15, "counter " << counter.data_as<int64_t>()[0]);
    ctx.free(x);
    ctx.barrier();
  });
  ASSERT_TRUE(res.all_ok()) << res.report();
  // Every key rwin wrote is under its prefix: the caller's own keys are safe.
  FileStore s(dir);
  EXPECT_GT(s.calls_with_prefix_count("rwin/1/"), 0);
  EXPECT_EQ(s.calls_with_prefix_count(""), s.calls_with_prefix_count("rwin/"));
  fs::remove_all(dir);
}

// Two jobs in a row on one store: the second meets on fresh keys (rwin/2/...), never on the
// first one's leftovers (which would let a rank run ahead of a peer that has not arrived).
TEST_P(CallerStore, ASecondContextOnTheSameStoreMeetsOnFreshKeys) {
  const TransportParam p = GetParam();
  const fs::path dir = fresh_dir("twice");
  auto res = run_on_store(2, p, dir, [&](Context& first, FileStore& store) {
    const auto a = first.allgather({static_cast<uint8_t>(first.rank() + 10)});
    MP_CHECK(a.size() == 2 && a[0][0] == 10 && a[1][0] == 11, "first allgather");
    Context second(std::shared_ptr<rwin::Store>(&store, [](rwin::Store*) {}), first.rank(), 2, store_options(p));
    const auto b = second.allgather({static_cast<uint8_t>(second.rank() + 20)});
    MP_CHECK(b.size() == 2 && b[0][0] == 20 && b[1][0] == 21, "second allgather read " << int(b[0][0]) << ", "
                                                                                       << int(b[1][0]));
  });
  ASSERT_TRUE(res.all_ok()) << res.report();
  FileStore s(dir);
  EXPECT_GT(s.calls_with_prefix_count("rwin/2/"), 0);
  fs::remove_all(dir);
}

// Rank 2 dies (SIGKILL) in the middle of the job. Each rank runs a heartbeat of its own (a file it
// rewrites every 20 ms; a peer's file unchanged for 2 s is a dead peer) and tells rwin through
// fail_peer from that thread while the main thread is blocked in a wait for rank 2's signal. The
// wait ends with PeerFailed naming rank 2 and the heartbeat's reason, a put to rank 2 is refused
// the same way, and the survivors still meet and leave normally.
TEST_P(CallerStore, AKilledRankIsNamedByEverySurvivorThroughFailPeerFromAHeartbeat) {
  const TransportParam p = GetParam();
  const fs::path dir = fresh_dir("kill");
  auto res = run_on_store(3, p, dir, [&](Context& ctx, FileStore&) {
    const int me = ctx.rank();
    std::atomic<bool> stop{false};
    auto beat_file = [&](int r) { return dir / ("beat." + std::to_string(r)); };
    std::thread heartbeat([&] {
      std::vector<std::string> last(3);
      std::vector<std::chrono::steady_clock::time_point> changed(3, std::chrono::steady_clock::now());
      std::vector<bool> told(3, false);
      for (uint64_t k = 0; !stop.load(); ++k) {
        std::ofstream(beat_file(me)) << k;
        for (int r = 0; r < 3; ++r) {
          if (r == me || told[static_cast<size_t>(r)]) continue;
          std::string now_seen;
          std::ifstream(beat_file(r)) >> now_seen;
          const auto t = std::chrono::steady_clock::now();
          if (now_seen != last[static_cast<size_t>(r)]) {
            last[static_cast<size_t>(r)] = now_seen;
            changed[static_cast<size_t>(r)] = t;
          } else if (t - changed[static_cast<size_t>(r)] > std::chrono::seconds(2)) {
            ctx.fail_peer(r, "heartbeat of rank " + std::to_string(r) + " silent for 2 s");
            told[static_cast<size_t>(r)] = true;
          }
        }
        std::this_thread::sleep_for(Ms(20));
      }
    });
    struct Join {
      std::atomic<bool>& stop;
      std::thread& t;
      ~Join() {
        stop = true;
        t.join();
      }
    } join{stop, heartbeat};
    SignalArray sig = ctx.alloc_signals("sig", 2);  // word 0: from rank 2 (never); word 1: survivors
    Window w = ctx.alloc_window("w", DType::I64, {1, 8});
    ctx.barrier();
    if (me == 2) ::raise(SIGKILL);
    // Rank 2 never notifies: the wait ends when the transport sees rank 2's connection fail (UCX
    // over tcp, verbs), or else through the heartbeat's fail_peer (shared memory: nothing breaks).
    std::string why;
    try {
      ctx.wait(sig.at(0), 1, WaitCmp::GE, Ms(25000));
    } catch (const Error& e) {
      MP_CHECK(e.code() == ErrorCode::PeerFailed, "wait ended with " << to_string(e.code()) << ": " << e.what());
      why = e.what();
    }
    MP_CHECK(why.find("peer 2 failed (") != std::string::npos, "wait ended without naming peer 2: '" << why << "'");
    const bool by_heartbeat = why.find("fail_peer: heartbeat of rank 2 silent for 2 s") != std::string::npos;
    MP_CHECK(by_heartbeat || (p.detects_dead_peer && why.find("-> peer 2") != std::string::npos),
             "neither the heartbeat nor the transport is named: " << why);
    expect_error([&] { ctx.put(w.all(), 2, w.all()); }, ErrorCode::PeerFailed, {"peer 2 failed ("});
    // The survivors still talk to each other.
    const int other = 1 - me;
    ctx.put(w.all(), other, w.all());
    ctx.notify(sig.at(1), other, 1);
    ctx.wait(sig.at(1), 1);
  });
  // (The harness's deadline is far above the 2 s heartbeat bound: a wait that never ended fails it.)
  ASSERT_FALSE(res.timed_out) << res.report();
  EXPECT_EQ(res.ranks[2].status, 128 + SIGKILL) << res.report();
  EXPECT_EQ(res.ranks[0].status, 0) << res.report();
  EXPECT_EQ(res.ranks[1].status, 0) << res.report();
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Transports, CallerStore, ::testing::ValuesIn(rwin_test::transports()),
                         [](const ::testing::TestParamInfo<TransportParam>& pinfo) { return pinfo.param.name; });

// Bad input on a store job, in one process (a job of one needs no peer).
TEST(CallerStoreArguments, RefusedClearlyBeforeAnythingStarts) {
  const fs::path dir = fresh_dir("args");
  auto store = std::make_shared<FileStore>(dir);
  Options o;
  o.transport = "ucx";
  ::setenv("UCX_TLS", "posix,sysv,self", 1);
  auto code_of = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return std::string(to_string(e.code())) + ": " + e.what();
    }
    return "no error";
  };
  EXPECT_NE(code_of([&] { Context c(nullptr, 0, 1, o); }).find("InvalidArgument: "), std::string::npos);
  const std::string outside = code_of([&] { Context c(store, 3, 2, o); });
  EXPECT_NE(outside.find("InvalidArgument"), std::string::npos) << outside;
  EXPECT_NE(outside.find("rank 3 is outside a job of 2"), std::string::npos) << outside;
  Options with_root = o;
  with_root.root = "127.0.0.1:1";
  const std::string root = code_of([&] { Context c(store, 0, 1, with_root); });
  EXPECT_NE(root.find("Options::root is set"), std::string::npos) << root;
  Options other_rank = o;
  other_rank.rank = 1;
  const std::string disagree = code_of([&] { Context c(store, 0, 2, other_rank); });
  EXPECT_NE(disagree.find("Options::rank is 1"), std::string::npos) << disagree;

  // A store that fails: the error names the store call, the key and the store's own message.
  struct Broken final : rwin::Store {
    void set(const std::string&, const std::vector<uint8_t>&) override {}
    std::optional<std::vector<uint8_t>> get(const std::string&, Ms) override { return std::nullopt; }
    int64_t add(const std::string&, int64_t) override { throw std::runtime_error("disk full"); }
    bool check(const std::vector<std::string>&) override { return false; }
    bool wait(const std::vector<std::string>&, Ms) override { return false; }
  };
  const std::string broken = code_of([&] { Context c(std::make_shared<Broken>(), 0, 1, o); });
  EXPECT_NE(broken.find("Bootstrap: "), std::string::npos) << broken;
  EXPECT_NE(broken.find("add('rwin/contexts/0') failed: disk full"), std::string::npos) << broken;

  // A peer that never arrives: Timeout naming it, at the start-up deadline.
  Options quick = o;
  quick.startup_timeout = Ms(600);
  const std::string late = code_of([&] { Context c(store, 0, 2, quick); });
  EXPECT_NE(late.find("Timeout: "), std::string::npos) << late;
  EXPECT_NE(late.find("rank 1 of 2 (never arrived)"), std::string::npos) << late;
  EXPECT_NE(late.find("the caller's store"), std::string::npos) << late;

  {
    // A job of one runs; fail_peer refuses this rank and ranks outside the job.
    Context one(store, 0, 1, o);
    EXPECT_EQ(one.options().bootstrap, "store");
    const std::string self = code_of([&] { one.fail_peer(0, "x"); });
    EXPECT_NE(self.find("InvalidArgument: "), std::string::npos) << self;
    EXPECT_NE(self.find("rank 0: fail_peer: peer 0 is not another rank"), std::string::npos) << self;
    EXPECT_NE(code_of([&] { one.fail_peer(5, "x"); }).find("InvalidArgument"), std::string::npos);
  }
  ::unsetenv("UCX_TLS");
  fs::remove_all(dir);
}

}  // namespace

// rwin::Domain (issue 25 item 5): prepare -> import_table -> commit / abort -> release, the caller
// carrying the descriptors (here: files in a directory, as the runtime's frames would). Ranks are
// forked processes. Over UCX tcp (loopback) and shared memory; AGENT_TEST_TRANSPORT=verbs in the guest.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <numeric>

#include "agent_harness.h"
#include "rwin/domain.h"

using namespace agent_test;
using rwin::Domain;
using rwin::DomainOptions;
using rwin::ErrorCode;
using rwin::NotifyOp;
using rwin::WaitCmp;

namespace {

class DomainMp : public ::testing::TestWithParam<Tls> {
 protected:
  void SetUp() override { use_tls(GetParam()); }
  TempDir dir;
};

DomainOptions dopts() {
  DomainOptions o;
  o.agent = options(/*progress_thread=*/true);
  o.signals = 8;
  return o;
}

// The caller's side of the exchange: publish mine, gather all in rank order.
std::vector<std::vector<uint8_t>> exchange(const TempDir& dir, const std::string& round, const Domain& d) {
  publish(dir, round + "." + std::to_string(d.rank()), d.descriptor());
  std::vector<std::vector<uint8_t>> table;
  for (int r = 0; r < d.nranks(); ++r) table.push_back(await(dir, round + "." + std::to_string(r)));
  return table;
}

// Every rank reached `name` (files as the caller's barrier).
void caller_barrier(const TempDir& dir, const std::string& name, int rank, int nranks) {
  publish(dir, name + "." + std::to_string(rank));
  for (int r = 0; r < nranks; ++r) (void)await(dir, name + "." + std::to_string(r));
}

uint32_t fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}
// Re-seals a descriptor the test changed on purpose (a forger who knows the format).
void reseal(std::vector<uint8_t>& d) {
  const uint32_t s = fnv1a(d.data(), d.size() - 4);
  for (int i = 0; i < 4; ++i) d[d.size() - 4 + i] = static_cast<uint8_t>(s >> (8 * i));
}
constexpr size_t kHeader = 46;  // the domain header before the agent descriptor (agent/domain.cpp)

// Three ranks: the flow, a ring shift of 1 MiB + 3 bytes (cut into chunks), an allreduce built from
// put_notify / wait as the runtime builds its collectives, gets, and Set / AtomicAdd signals.
TEST_P(DomainMp, ThreeRanksRingShiftAndAllreduce) {
  constexpr int n = 3;
  constexpr size_t kSlice = (1 << 20) + 3;
  constexpr size_t kVec = 1000;  // int64 elements per rank in the allreduce
  constexpr size_t kRed = 2 * kSlice + 5;  // the allreduce's area: rank r's vector at kRed + r*kVec*8
  const size_t window = kRed + n * kVec * 8;
  std::vector<pid_t> kids;
  for (int rank = 0; rank < n; ++rank) {
    kids.push_back(spawn("rank" + std::to_string(rank), [&, rank] {
      Domain d(0x5eed, rank, n, window, dopts());
      REQUIRE(d.state() == Domain::State::Prepared);
      REQUIRE(d.descriptor().size() <= Domain::kMaxDescriptorBytes);
      REQUIRE(reinterpret_cast<uintptr_t>(d.base()) % 4096 == 0);
      auto table = exchange(dir, "desc", d);
      d.import_table(table);
      REQUIRE(d.state() == Domain::State::Imported);
      caller_barrier(dir, "imported", rank, n);  // the caller commits once every rank imported
      d.commit();
      auto* w = static_cast<uint8_t*>(d.base());
      // Ring shift: my slice goes to the next rank's second half.
      for (size_t i = 0; i < kSlice; ++i) w[i] = pattern(i, uint8_t(rank));
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      d.put_notify(next, kSlice, w, kSlice, 0, 1);
      d.wait(0, 1, WaitCmp::EQ);
      for (size_t i = 0; i < kSlice; ++i) REQUIRE(w[kSlice + i] == pattern(i, uint8_t(prev)));
      // Allreduce (sum of int64): every rank puts its vector into everyone's slot [rank], adds 1 to
      // their signal 1, waits for n, reduces locally.
      std::vector<int64_t> mine(kVec);
      for (size_t i = 0; i < kVec; ++i) mine[i] = int64_t(i) * (rank + 1) - rank;
      for (int p = 0; p < n; ++p) d.put_notify(p, kRed + rank * kVec * 8, mine.data(), kVec * 8, 1, 1);
      d.wait(1, n, WaitCmp::GE);
      REQUIRE(d.signal(1) == n);
      std::vector<int64_t> sum(kVec, 0);
      for (int r = 0; r < n; ++r) {
        // The area sits at an odd offset on purpose (byte offsets): read it with memcpy, not a cast.
        std::vector<int64_t> v(kVec);
        std::memcpy(v.data(), w + kRed + r * kVec * 8, kVec * 8);
        for (size_t i = 0; i < kVec; ++i) sum[i] += v[i];
      }
      for (size_t i = 0; i < kVec; ++i) {
        int64_t want = 0;
        for (int r = 0; r < n; ++r) want += int64_t(i) * (r + 1) - r;
        REQUIRE(sum[i] == want);
      }
      // get: the previous rank's own slice, from its window.
      std::vector<uint8_t> back(kSlice);
      d.get(back.data(), prev, 0, kSlice);
      for (size_t i = 0; i < kSlice; i += 997) REQUIRE(back[i] == pattern(i, uint8_t(prev)));
      // Set, then AtomicAdd, on signal 2 of the next rank; a notify to self.
      d.notify(next, 2, 40, NotifyOp::Set);
      d.flush();  // the Set lands before the add (two notifies to one word are not ordered otherwise)
      d.notify(next, 2, 2, NotifyOp::AtomicAdd);
      d.notify(rank, 3, 7, NotifyOp::Set);
      d.flush();
      d.wait(2, 42, WaitCmp::EQ);
      REQUIRE(d.test(3, 7, WaitCmp::EQ));
      REQUIRE(!d.test(3, 8, WaitCmp::GE));
      REQUIRE(d.failed_peers().empty());
      caller_barrier(dir, "done", rank, n);  // no rank releases while another still reads from it
      d.release();
      REQUIRE(d.state() == Domain::State::Released);
      REQUIRE(w[kSlice] == pattern(0, uint8_t(prev)));  // still mapped, still readable
      REQUIRE(d.signal(2) == 42);
      expect_error([&] { d.notify(next, 0, 1); }, ErrorCode::UseAfterFree, {"released"});
      return 0;
    }));
  }
  for (pid_t k : kids) EXPECT_EQ(reap(k, 120s), 0);
}

// The table is checked whole before anything connects; every bad entry is named, the domain stays
// prepared, and the right table then works. Two ranks in one process (two agents).
TEST_P(DomainMp, BadTablesAndTheTransaction) {
  const pid_t kid = spawn("tables", [&] {
    Domain a(7, 0, 2, 4096, dopts());
    Domain b(7, 1, 2, 4096, dopts());
    const auto da = a.descriptor(), db = b.descriptor();
    REQUIRE(da.size() <= Domain::kMaxDescriptorBytes && da.size() > kHeader + 8);
    using Table = std::vector<std::vector<uint8_t>>;
    auto bad = [&](Table t, ErrorCode code, std::initializer_list<std::string> parts) {
      expect_error([&] { b.import_table(t); }, code, parts);
      REQUIRE(b.state() == Domain::State::Prepared);
    };
    bad({da}, ErrorCode::InvalidArgument, {"domain 0x7 rank 1 of 2", "1 descriptors for a domain of 2 ranks"});
    bad({db, da}, ErrorCode::InvalidArgument, {"entry 0 is rank 1's descriptor"});
    Domain foreign(8, 0, 2, 4096, dopts());
    bad({foreign.descriptor(), db}, ErrorCode::InvalidArgument, {"entry 0 is of domain 0x8, not 0x7", "foreign"});
    Domain bigger(7, 0, 2, 8192, dopts());
    bad({bigger.descriptor(), db}, ErrorCode::WindowMismatch, {"entry 0 has a window of 8192 bytes"});
    Domain three(7, 0, 3, 4096, dopts());
    bad({three.descriptor(), db}, ErrorCode::InvalidArgument, {"entry 0 was prepared for 3 ranks"});
    auto mangled = da;
    mangled[kHeader + 20] ^= 0x40;
    bad({mangled, db}, ErrorCode::InvalidArgument, {"entry 0", "checksum does not match"});
    bad({std::vector<uint8_t>(da.begin(), da.begin() + 30), db}, ErrorCode::InvalidArgument, {"entry 0", "cut short"});
    bad({std::vector<uint8_t>(100, 0xab), db}, ErrorCode::InvalidArgument, {"no 'RWDM' magic"});
    bad({std::vector<uint8_t>(300, 0), db}, ErrorCode::InvalidArgument, {"300 bytes, more than"});
    auto v2 = da;
    v2[4] = 2;
    bad({v2, db}, ErrorCode::InvalidArgument, {"version 2, this build reads version 1"});
    auto trailing = da;
    trailing.push_back(0);
    bad({trailing, db}, ErrorCode::InvalidArgument, {"entry 0"});
    // Forged: a correct format and checksum, but a token the owner never issued. The agent
    // descriptor: magic u32, version u16, transport (u16 + bytes), address (u16 + bytes), token.
    auto forged = da;
    size_t at = kHeader + 6;
    at += 2 + (forged[at] | forged[at + 1] << 8);
    at += 2 + (forged[at] | forged[at + 1] << 8);
    forged[at] ^= 0xff;
    reseal(forged);
    bad({forged, db}, ErrorCode::PeerFailed, {"entry 0 (rank 0"});
    // This rank's own entry must be its own descriptor: another incarnation's is stale.
    {
      Domain old(7, 1, 2, 4096, dopts());
      bad({da, old.descriptor()}, ErrorCode::InvalidArgument, {"entry 1 is not this rank's own descriptor", "stale"});
    }
    // A released rank's descriptor: its owner is gone.
    {
      auto gone = std::make_unique<Domain>(7, 0, 2, 4096, dopts());
      const auto dg = gone->descriptor();
      gone->release();
      bad({dg, db}, ErrorCode::PeerFailed, {"entry 0 (rank 0"});
    }
    // The transaction: nothing runs before commit; abort returns to prepared.
    expect_error([&] { b.put(0, 0, da.data(), 8); }, ErrorCode::InvalidArgument,
                 {"the domain is prepared, it must be committed", "prepare -> import_table -> commit"});
    expect_error([&] { b.commit(); }, ErrorCode::InvalidArgument, {"commit: the domain is prepared"});
    b.import_table(Table{da, db});
    REQUIRE(b.state() == Domain::State::Imported);
    expect_error([&] { b.import_table(Table{da, db}); }, ErrorCode::InvalidArgument, {"the domain is imported"});
    b.abort();
    REQUIRE(b.state() == Domain::State::Prepared);
    expect_error([&] { b.commit(); }, ErrorCode::InvalidArgument, {"commit: the domain is prepared"});
    b.import_table(Table{da, db});
    b.commit();
    a.import_table(Table{da, db});
    a.commit();
    expect_error([&] { b.abort(); }, ErrorCode::InvalidArgument, {"committed"});
    // Bad arguments: named, nothing sent.
    uint64_t x = 0x1122334455667788ull;
    expect_error([&] { b.put(2, 0, &x, 8); }, ErrorCode::PeerOutOfRange, {"peer 2 is outside 0..1"});
    expect_error([&] { b.put(-1, 0, &x, 8); }, ErrorCode::PeerOutOfRange, {"peer -1"});
    expect_error([&] { b.put(0, 4090, &x, 8); }, ErrorCode::OutOfBounds, {"[4090, 4090+8)", "window of 4096 bytes"});
    expect_error([&] { b.put(0, ~uint64_t(0) - 2, &x, 8); }, ErrorCode::OutOfBounds, {"window of 4096 bytes"});
    expect_error([&] { b.get(&x, 0, 4096, 1); }, ErrorCode::OutOfBounds, {"get of 1 bytes at offset 4096"});
    expect_error([&] { b.notify(0, 8, 1); }, ErrorCode::OutOfBounds, {"signal 8 is outside 0..7"});
    expect_error([&] { b.wait(9, 1); }, ErrorCode::OutOfBounds, {"signal 9"});
    expect_error([&] { b.fail_peer(1, "me"); }, ErrorCode::InvalidArgument, {"is this rank"});
    expect_error([&] { b.fail_peer(5, "x"); }, ErrorCode::PeerOutOfRange, {"peer 5"});
    expect_error([&] { b.wait(0, 1, WaitCmp::GE, std::chrono::milliseconds(50)); }, ErrorCode::Timeout,
                 {"wait for signal 0 >= 1", "value 0", "within 50 ms"});
    expect_error([&] { Domain(1, 2, 2, 64, dopts()); }, ErrorCode::PeerOutOfRange, {"rank 2 is outside 0..1"});
    expect_error([&] { Domain(1, 0, 0, 64, dopts()); }, ErrorCode::InvalidArgument, {"nranks 0"});
    {
      auto o = dopts();
      o.signals = 0;
      expect_error([&] { Domain(1, 0, 1, 64, o); }, ErrorCode::InvalidArgument, {"signals 0"});
    }
    // And the good path, both ways, after all that.
    b.put_notify(0, 8, &x, 8, 0, 1);
    a.wait(0, 1);
    uint64_t got = 0;
    std::memcpy(&got, static_cast<char*>(a.base()) + 8, 8);
    REQUIRE(got == x);
    a.get(&got, 1, 0, 8);
    REQUIRE(got == 0);
    // A window of 0 bytes is a signal-only domain.
    Domain s0(3, 0, 1, 0, dopts());
    s0.import_table(Table{s0.descriptor()});
    s0.commit();
    s0.notify(0, 0, 5, NotifyOp::Set);
    s0.wait(0, 5, WaitCmp::EQ);
    expect_error([&] { s0.put(0, 0, &x, 1); }, ErrorCode::OutOfBounds, {"window of 0 bytes"});
    return 0;
  });
  EXPECT_EQ(reap(kid, 120s), 0);
}

// A rank stops answering (SIGSTOP: its sockets stay open, so only the caller knows). A survivor's
// health lane (a thread here) calls fail_peer while the owner is blocked in a wait for that rank:
// the wait ends with PeerFailed naming the rank and the reason, every later call to it fails the
// same way, and the survivors keep working with each other. Then a rank is SIGKILLed with no one
// telling: the transport finds it (its connection closes) and names it too.
TEST_P(DomainMp, FailPeerFromTheHealthLaneAndKilledRank) {
  constexpr int n = 4;
  std::vector<pid_t> kids;
  for (int rank = 0; rank < n; ++rank) {
    kids.push_back(spawn("rank" + std::to_string(rank), [&, rank] {
      auto o = dopts();
      o.agent.keepalive_timeout = std::chrono::seconds(60);  // silence alone must not decide it here
      Domain d(0xfeed, rank, n, 1 << 16, o);
      d.import_table(exchange(dir, "desc", d));
      caller_barrier(dir, "imported", rank, n);
      d.commit();
      if (rank >= 2) {  // rank 2 is stopped, rank 3 killed, by the test's parent
        publish(dir, "victim." + std::to_string(rank));
        for (;;) std::this_thread::sleep_for(50ms);
      }
      const int other = 1 - rank;
      // The health lane: notices rank 2's missing heartbeat (the parent's file) and says so.
      std::thread lane([&] {
        (void)await(dir, "stopped.2", nullptr, 60s);
        d.fail_peer(2, "no heartbeat for 1.0 s");
      });
      const auto t0 = std::chrono::steady_clock::now();
      const std::string m = expect_error([&] { d.wait(5, 1); }, ErrorCode::PeerFailed,
                                         {"domain 0xfeed rank " + std::to_string(rank), "wait for signal 5 >= 1",
                                          "rank 2 failed: no heartbeat for 1.0 s (fail_peer)"});
      lane.join();
      std::fprintf(stderr, "rank %d: the blocked wait ended %.3f s after it began: %s\n", rank,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), m.c_str());
      uint64_t x = 42;
      expect_error([&] { d.put(2, 0, &x, 8); }, ErrorCode::PeerFailed,
                   {"put of 8 bytes at offset 0 to rank 2", "rank 2 failed: no heartbeat"});
      expect_error([&] { d.notify(2, 0, 1); }, ErrorCode::PeerFailed, {"rank 2 failed"});
      REQUIRE(d.failed_peers() == std::vector<int>{2});
      // The survivors still work together. Not with wait(): once a rank failed, an unsatisfied wait
      // throws after its first 5 ms slice (the contract), and the other survivor's put_notify may
      // land later than that on a loaded machine; test() polls without that rule.
      d.put_notify(other, 64 * rank, &x, 8, 6, 1);
      const auto until = std::chrono::steady_clock::now() + 60s;
      while (!d.test(6, 1)) REQUIRE(std::chrono::steady_clock::now() < until);
      caller_barrier(dir, "survived", rank, 2);
      // Rank 3 dies; nobody tells: a wait ends when the agent sees the connection close. Every wait
      // throws from here on (rank 2 failed); the ones before the agent saw the close name rank 2 only.
      (void)await(dir, "killed.3", nullptr, 60s);
      std::string k;
      while (k.find("rank 3 failed") == std::string::npos) {
        REQUIRE(std::chrono::steady_clock::now() < until + 60s);
        k = expect_error([&] { d.wait(7, 1); }, ErrorCode::PeerFailed, {"rank 2 failed: no heartbeat"});
      }
      REQUIRE(k.find("rank 3 failed: found by the transport") != std::string::npos);
      std::fprintf(stderr, "rank %d: %s\n", rank, k.c_str());
      expect_error([&] { d.get(&x, 3, 0, 8); }, ErrorCode::PeerFailed, {"rank 3 failed"});
      caller_barrier(dir, "end", rank, 2);
      return 0;
    }));
  }
  (void)await(dir, "victim.2", nullptr, 60s);
  (void)await(dir, "victim.3", nullptr, 60s);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the survivors are blocked in wait(5)
  kill(kids[2], SIGSTOP);
  publish(dir, "stopped.2");
  (void)await(dir, "survived.0", nullptr, 60s);
  (void)await(dir, "survived.1", nullptr, 60s);
  kill(kids[3], SIGKILL);
  EXPECT_EQ(reap(kids[3]), 128 + SIGKILL);
  publish(dir, "killed.3");
  EXPECT_EQ(reap(kids[0], 120s), 0);
  EXPECT_EQ(reap(kids[1], 120s), 0);
  kill(kids[2], SIGKILL);
  reap(kids[2]);
}

INSTANTIATE_TEST_SUITE_P(Ucx, DomainMp,
                         ::testing::Values(Tls{"tcp", "tcp,self", "lo"}, Tls{"shm", "posix,sysv,self", nullptr}),
                         [](const auto& p) { return std::string(p.param.name); });
// rwin's own tcp transport (transport/tcp/): the same tests, its receiver thread serving the passive side.
INSTANTIATE_TEST_SUITE_P(Own, DomainMp, ::testing::Values(kOwnTcp), [](const auto& p) { return std::string(p.param.name); });

}  // namespace

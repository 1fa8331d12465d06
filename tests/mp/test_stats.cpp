// Context::stats() (issue 28 item 2): a known sequence of operations, and every counter checked against
// it, over every transport (on verbs the transport's own counters too). The counters are read before
// and after the sequence, so what start-up and the harness did does not enter the figures.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "rank_harness.h"

using namespace rwin;
using rwin_test::TransportParam;

namespace {

using StatsSuite = rwin_test::TransportSuite;

PeerStats minus(const PeerStats& a, const PeerStats& b) {
  PeerStats d;
  d.puts = a.puts - b.puts;
  d.put_bytes = a.put_bytes - b.put_bytes;
  d.put_adds = a.put_adds - b.put_adds;
  d.put_add_bytes = a.put_add_bytes - b.put_add_bytes;
  d.gets = a.gets - b.gets;
  d.get_bytes = a.get_bytes - b.get_bytes;
  d.chunks = a.chunks - b.chunks;
  d.notifies = a.notifies - b.notifies;
  d.fetching_atomics = a.fetching_atomics - b.fetching_atomics;
  d.fences = a.fences - b.fences;
  return d;
}

#define EXPECT_FIELD(d, field, want)                                                                      \
  MP_CHECK(((d).field) == (want), #field " is " << ((d).field) << ", expected " << (want) << " (" << what << ")")

TEST_P(StatsSuite, EveryCounterAfterAKnownSequence) {
  constexpr int64_t kChunk = 64 << 10;
  Options o;
  o.chunk_bytes = kChunk;  // so the expected chunk counts do not depend on the transport's default
  run(2, [](Context& ctx) {
    const int64_t n = 3 * kChunk + 5;  // bytes: cut into 4 chunks where the transport needs work requests
    Window data = ctx.alloc_window("data", DType::U8, {1, n});
    Window acc = ctx.alloc_window("acc", DType::I64, {1, 8});
    SignalArray sig = ctx.alloc_signals("sig", 4);
    std::vector<uint8_t> local(1000, 7);
    ctx.barrier();
    const Stats s0 = ctx.stats();
    MP_CHECK(s0.peers.size() == 2, "peers " << s0.peers.size());
    const bool direct = ctx.rma_mode(1 - ctx.rank()) == "direct";
    if (ctx.rank() == 0) {
      ctx.put(data.all(), 1, data.all());
      ctx.put(data.all(), 1, data.all());
      ctx.get(rwin::local(local.data(), {1, 1000}), 1, data.slice({0, 0}, {1, 1000}));
      ctx.put_nbi(data.slice({0, 0}, {1, 100}), 1, data.slice({0, 0}, {1, 100}));
      ctx.quiet();
      ctx.put(acc.all(), 1, acc.all(), AtomicType::Add);
      for (int i = 0; i < 3; ++i) ctx.notify(sig.at(0), 1, 1);
      (void)ctx.fetch_add(acc.slice({0, 0}, {1, 1}), 1, 1);
      (void)ctx.compare_swap(sig.at(1), 1, 0, 5);
      int64_t f = -1;
      ctx.fetch_add_nbi(&f, sig.at(2), 1, 1);
      ctx.fence(1);
      ctx.quiet();
      ctx.notify(sig.at(3), 0, 1);  // to itself
      ctx.quiet();                  // complete at its target: the wait is satisfied at the first look
      ctx.wait(sig.at(3), 1);
      MP_CHECK(ctx.test(sig.at(3), 1), "test of a set signal");
      MP_CHECK(!ctx.test(sig.at(3), 2, WaitCmp::EQ), "test of an unset value");
    } else {
      ctx.wait(sig.at(0), 3);
    }
    ctx.barrier();
    const Stats s1 = ctx.stats();
    const PeerStats to0 = minus(s1.peers[0], s0.peers[0]), to1 = minus(s1.peers[1], s0.peers[1]);
    const PeerStats all = minus(s1.total, s0.total);
    if (ctx.rank() == 0) {
      const uint64_t chunks = direct ? 0 : 2 * 4 + 1 + 1;  // two 4-chunk puts, the get, the put_nbi
      const char* what = "rank 0 -> peer 1";
      EXPECT_FIELD(to1, puts, 3u);
      EXPECT_FIELD(to1, put_bytes, uint64_t(2 * n + 100));
      EXPECT_FIELD(to1, gets, 1u);
      EXPECT_FIELD(to1, get_bytes, 1000u);
      EXPECT_FIELD(to1, chunks, chunks);
      EXPECT_FIELD(to1, put_adds, 1u);
      EXPECT_FIELD(to1, put_add_bytes, 64u);
      EXPECT_FIELD(to1, notifies, 3u);
      EXPECT_FIELD(to1, fetching_atomics, 3u);
      EXPECT_FIELD(to1, fences, 1u);
      what = "rank 0 -> itself";
      EXPECT_FIELD(to0, notifies, 1u);
      EXPECT_FIELD(to0, puts + to0.gets + to0.put_adds + to0.fetching_atomics + to0.fences, 0u);
      what = "rank 0 total";
      EXPECT_FIELD(all, notifies, 4u);
      EXPECT_FIELD(all, puts, 3u);
      EXPECT_FIELD(s1, waits - s0.waits, 1u);
      EXPECT_FIELD(s1, waits_blocked - s0.waits_blocked, 0u);
      EXPECT_FIELD(s1, wait_ns - s0.wait_ns, 0u);
      EXPECT_FIELD(s1, tests - s0.tests, 2u);
      EXPECT_FIELD(s1, tests_satisfied - s0.tests_satisfied, 1u);
      EXPECT_FIELD(s1, quiets - s0.quiets, 3u);
      // Verbs counts its work requests: at least one per chunk and per notify / atomic.
      if (ctx.transport_name().rfind("verbs", 0) == 0) {
        EXPECT_FIELD(s1, wrs - s0.wrs >= chunks + 3 + 3 ? 1 : 0, 1);
        EXPECT_FIELD(s1, cqes - s0.cqes > 0 ? 1 : 0, 1);
      } else {
        EXPECT_FIELD(s1, wrs, 0u);
      }
    } else {
      const char* what = "rank 1 (only waits)";
      EXPECT_FIELD(all, puts + all.gets + all.put_adds + all.notifies + all.fetching_atomics + all.chunks, 0u);
      EXPECT_FIELD(s1, waits - s0.waits, 1u);
      EXPECT_FIELD(s1, tests - s0.tests, 0u);
      EXPECT_FIELD(s1, quiets - s0.quiets, 0u);
      // Blocked or not depends on timing; the clock runs exactly when it was.
      MP_CHECK((s1.waits_blocked - s0.waits_blocked == 1) == (s1.wait_ns > s0.wait_ns),
               "waits_blocked " << s1.waits_blocked - s0.waits_blocked << ", wait_ns " << s1.wait_ns - s0.wait_ns);
    }
    const char* what = "both";
    EXPECT_FIELD(s1, barriers - s0.barriers, 1u);
    EXPECT_FIELD(s1, failed_peers, 0u);
  }, o);
}

INSTANTIATE_TEST_SUITE_P(Transports, StatsSuite, ::testing::ValuesIn(rwin_test::transports()),
                         [](const ::testing::TestParamInfo<TransportParam>& pinfo) { return pinfo.param.name; });

}  // namespace

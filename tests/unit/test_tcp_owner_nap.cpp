// The tcp receiver thread's naps while its owner serves (transport/tcp/owner_nap.h): longer while
// the owner polls on, and still a takeover when it stops.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tcp_pair.h"
#include "transport/tcp/owner_nap.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace {

using rwin::transport::tcp::OwnerNap;
using namespace rwin_tcp_test;
constexpr int64_t kUs = 1000;
constexpr int64_t kWindow = 200 * kUs;

TEST(OwnerNap, TheFirstNapEndsWithTheOwnersWindowAndEachOneItOutlastsDoublesTheNext) {
  OwnerNap nap;
  EXPECT_EQ(nap.next(150 * kUs, kWindow), 150 * kUs);  // what is left of the window, no more
  EXPECT_EQ(nap.next(190 * kUs, kWindow), 400 * kUs);
  EXPECT_EQ(nap.next(199 * kUs, kWindow), OwnerNap::kLongest);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(nap.next(kWindow, kWindow), OwnerNap::kLongest) << "nap " << i;
}

TEST(OwnerNap, AnOwnerFoundAwayEndsTheStreak) {
  OwnerNap nap;
  (void)nap.next(kWindow, kWindow);
  (void)nap.next(kWindow, kWindow);
  EXPECT_EQ(nap.next(0, kWindow), 0);  // away: no nap, the thread serves
  EXPECT_EQ(nap.next(-5, kWindow), 0);
  EXPECT_EQ(nap.next(120 * kUs, kWindow), 120 * kUs) << "a new stretch starts with the window again";
  EXPECT_EQ(nap.next(120 * kUs, kWindow), 400 * kUs);
}

TEST(OwnerNap, ANapIsNeverShorterThanTheWindowsRestNorLongerThanLongest) {
  // The oversubscribed window (2 ms) is longer than kLongest: each nap ends with it, as before.
  constexpr int64_t kBig = 2000 * kUs;
  OwnerNap nap;
  EXPECT_EQ(nap.next(1500 * kUs, kBig), 1500 * kUs);
  EXPECT_EQ(nap.next(1800 * kUs, kBig), 1800 * kUs);
  EXPECT_EQ(nap.next(300 * kUs, kBig), 300 * kUs);
  OwnerNap small;
  (void)small.next(kWindow, kWindow);
  for (int64_t left : {1 * kUs, 100 * kUs, 199 * kUs}) {
    const int64_t n = small.next(left, kWindow);
    EXPECT_GE(n, left);
    EXPECT_LE(n, OwnerNap::kLongest);
  }
}

// Rank 1's owner polls without a gap: its receiver thread looks at it less often than once a window
// (it used to wake every 200 us), and when the owner stops, the thread still serves a fetch-add.
TEST(OwnerNap, AThreadLooksLessOftenAtAnOwnerThatPollsOnAndStillServesWhenItStops) {
  Pair p;
  auto& t1 = dynamic_cast<rwin::transport::tcp::TcpTransport&>(*p.r[1].t);
  const auto window = t1.owner_window();
  std::atomic<bool> stop{false}, polling{false};
  std::atomic<uint64_t> wakes_before{0};
  std::atomic<int> long_gaps{0};
  std::thread owner1([&] {
    std::vector<tp::Completion> done;
    auto last = std::chrono::steady_clock::now();
    bool measuring = false;
    while (!stop.load()) {
      p.r[1].t->poll(done);
      done.clear();
      const auto now = std::chrono::steady_clock::now();
      if (measuring && now - last > window / 2) ++long_gaps;  // a gap the thread may take for an absence
      last = now;
      if (!measuring && polling.load()) {
        measuring = true;
        wakes_before = t1.receiver_wakes();
      }
    }
  });
  // An arrival while rank 1's owner polls: its thread wakes in epoll_wait, finds the owner there and
  // naps from then on (one that came before the owner's first poll is served by the thread, which
  // then sleeps in epoll_wait again: so until it is seen napping).
  uint64_t old = 0, adds = 0;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!t1.receiver_napping() && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);
    ASSERT_EQ(old, adds++);
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(t1.receiver_napping()) << "rank 1's receiver thread never napped beside its polling owner";
  polling = true;
  constexpr auto kStretch = 100ms;
  std::this_thread::sleep_for(kStretch);
  stop = true;
  owner1.join();
  const uint64_t wakes = t1.receiver_wakes() - wakes_before.load();
  const uint64_t once_a_window = static_cast<uint64_t>(kStretch / window);  // 500: the old cadence
  EXPECT_LE(wakes, once_a_window / 2 + 3 * static_cast<uint64_t>(long_gaps.load()) + 2)
      << "rank 1's receiver thread woke " << wakes << " times in " << kStretch.count() << " ms of its owner's polls ("
      << long_gaps.load() << " gaps over half a window)";
  // The owner left without saying so: the thread takes over and serves.
  const uint64_t wakes_at_stop = t1.receiver_wakes();
  const auto w = p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1));
  ASSERT_TRUE(w.ok) << w.error;
  EXPECT_EQ(old, adds);
  EXPECT_GT(t1.receiver_wakes(), wakes_at_stop) << "served without rank 1's thread waking";
}

}  // namespace

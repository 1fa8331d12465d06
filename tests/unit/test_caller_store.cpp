// The bootstrap on a store the caller brings (bootstrap.h, the caller_store constructor), with
// ranks as threads over one in-memory store: collectives meet under the job's prefix, and a
// failure reported from another thread (report_failure, what Context::fail_peer calls) ends a
// collective that waits for the dead rank. Run under TSan too (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "bootstrap/bootstrap.h"

namespace rb = rwin::bootstrap;
using namespace std::chrono_literals;

namespace {

// A thread-safe dict with blocking reads: the smallest store a caller could write.
class MemStore final : public rb::Store {
 public:
  void set(const std::string& key, std::span<const uint8_t> value) override {
    std::lock_guard<std::mutex> l(mu_);
    kv_[key].assign(value.begin(), value.end());
    cv_.notify_all();
  }
  rb::Bytes get(const std::string& key, rb::Millis timeout) override {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, timeout, [&] { return kv_.count(key) > 0; })) {
      throw rb::BootstrapError(rb::BootstrapError::Kind::Timeout, "get " + key);
    }
    return kv_[key];
  }
  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> l(mu_);
    return counters_[key] += delta;
  }
  std::vector<bool> check(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<bool> out;
    for (const auto& k : keys) out.push_back(kv_.count(k) > 0);
    return out;
  }
  void wait(const std::vector<std::string>& keys, rb::Millis timeout) override {
    std::unique_lock<std::mutex> l(mu_);
    auto all = [&] {
      for (const auto& k : keys) {
        if (!kv_.count(k)) return false;
      }
      return true;
    };
    if (!cv_.wait_for(l, timeout, all)) throw rb::BootstrapError(rb::BootstrapError::Kind::Timeout, "wait");
  }
  size_t keys_with_prefix(const std::string& p) {
    std::lock_guard<std::mutex> l(mu_);
    size_t n = 0;
    for (const auto& [k, v] : kv_) n += k.rfind(p, 0) == 0;
    return n;
  }
  size_t size() {
    std::lock_guard<std::mutex> l(mu_);
    return kv_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, rb::Bytes> kv_;
  std::map<std::string, int64_t> counters_;
};

rb::BootstrapConfig config(rb::Millis t) {
  rb::BootstrapConfig c;
  c.startup_timeout = t;
  c.op_timeout = t;
  return c;
}

TEST(CallerStoreBootstrap, ThreeRanksAllgatherAndBarrierUnderTheJobPrefix) {
  auto store = std::make_shared<MemStore>();
  std::vector<std::vector<rb::Bytes>> got(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      rb::Bootstrap bs(r, 3, store, config(10s), "a test store");
      EXPECT_TRUE(bs.caller_store());
      got[static_cast<size_t>(r)] = bs.allgather(std::vector<uint8_t>{static_cast<uint8_t>(r * 7)});
      bs.barrier();
      bs.barrier(10s, [] {});
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(got[static_cast<size_t>(r)].size(), 3u);
    for (int q = 0; q < 3; ++q) EXPECT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(q)].at(0), q * 7);
  }
  // Every key is the job's (rwin/1/...) but the per-rank context counters, kept beside them.
  EXPECT_EQ(store->keys_with_prefix("rwin/1/"), store->size());
}

TEST(CallerStoreBootstrap, AFailureReportedFromAnotherThreadEndsABarrierWaitingForTheDeadRank) {
  auto store = std::make_shared<MemStore>();
  std::unique_ptr<rb::Bootstrap> a, b;
  // Rank 1 arrives, then never comes to the barrier (it "died").
  std::thread t1([&] { b = std::make_unique<rb::Bootstrap>(1, 2, store, config(30s), "a test store"); });
  a = std::make_unique<rb::Bootstrap>(0, 2, store, config(30s), "a test store");
  t1.join();
  std::thread health([&] {
    std::this_thread::sleep_for(50ms);  // the barrier below is waiting by now (or about to)
    a->report_failure(1, "heartbeat lost");
  });
  std::string what;
  rb::BootstrapError::Kind kind = rb::BootstrapError::Kind::Config;
  try {
    a->barrier();
  } catch (const rb::BootstrapError& e) {
    what = e.what();
    kind = e.kind();
  }
  health.join();
  EXPECT_EQ(kind, rb::BootstrapError::Kind::PeerFailed) << what;
  EXPECT_NE(what.find("peer 1 failed (heartbeat lost"), std::string::npos) << what;
  ASSERT_EQ(a->failures().size(), 1u);
  EXPECT_EQ(a->failures()[0].rank, 1);
  // The survivors-only shutdown barrier does not wait for it.
  a->barrier(5s, [] {}, /*survivors_only=*/true);
  // A second report of the same rank keeps the first reason.
  a->report_failure(1, "again");
  a->poll_failures();
  EXPECT_EQ(a->failures()[0].how, "heartbeat lost");
}

TEST(CallerStoreBootstrap, ANullStoreIsAConfigError) {
  try {
    rb::Bootstrap bs(0, 1, std::shared_ptr<rb::Store>(), config(1s), "nothing");
    FAIL() << "accepted a null store";
  } catch (const rb::BootstrapError& e) {
    EXPECT_EQ(e.kind(), rb::BootstrapError::Kind::Config);
    EXPECT_NE(std::string(e.what()).find("no store given"), std::string::npos) << e.what();
  }
}

}  // namespace

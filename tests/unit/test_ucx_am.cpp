// UCX am mode in one process (the rank talks to itself through the same protocol): every op
// works, and an address outside the target's windows (a forged or stale key) is dropped by the
// target, named on stderr and reported to the sender, with nothing written outside a window.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_transport_impl.h"
#include "ucx_self_rank.h"

namespace rwin::transport::ucx {
// Feeds requests to the am target as if UCX had delivered them (eager, in the order given).
struct AmTestAccess {
  static ucs_status_t deliver(Transport& t, const AmRequest& h, void* data, size_t len) {
    ucp_am_recv_param_t param{};
    return dynamic_cast<UcxTransport&>(t).handle_request(&h, sizeof h, data, len, &param);
  }
  static uint64_t next_seq(Transport& t, int sender) {
    return dynamic_cast<UcxTransport&>(t).inbound_[static_cast<size_t>(sender)].next_seq;
  }
};
}  // namespace rwin::transport::ucx

namespace rb = rwin::bootstrap;
namespace rt = rwin::transport;

namespace {

struct AmRank : rwin_test::UcxSelfRank {
  AmRank() : UcxSelfRank("am") {}
};

rt::Work work(rt::Op op, void* local, const rt::MemoryRegion* mr, uint64_t addr, const rt::RemoteKey* rkey, size_t bytes,
              uint64_t operand = 0, uint64_t compare = 0) {
  return rwin_test::self_work(op, local, mr, addr, rkey, bytes, operand, compare);
}

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    if (b[i] != 0) return false;
  }
  return true;
}

TEST(UcxAmTransport, EveryOpCompletesAndNotifyNeedsNoFlush) {
  AmRank r;
  EXPECT_NE(r.tp->describe().find("am rma"), std::string::npos) << r.tp->describe();
  EXPECT_TRUE(r.tp->write_then_atomic_ordered(0));
  auto mr = r.tp->allocate(1 << 22);
  auto rkey = r.tp->unpack_key(0, mr->packed_key());
  auto* mem = static_cast<uint8_t*>(mr->addr());
  const size_t half = (1 << 22) / 2;
  for (size_t i = 0; i < half; ++i) mem[i] = static_cast<uint8_t>(i * 7 + 1);
  // A large (rendezvous-sized) write, a read back, then atomics on the word after.
  EXPECT_TRUE(r.run(work(rt::Op::Write, mem, mr.get(), rkey->base() + half, rkey.get(), half - 64)).ok);
  EXPECT_EQ(std::memcmp(mem, mem + half, half - 64), 0);
  std::vector<uint8_t> back(half - 64);
  EXPECT_TRUE(r.run(work(rt::Op::Read, back.data(), nullptr, rkey->base() + half, rkey.get(), back.size())).ok);
  EXPECT_EQ(std::memcmp(back.data(), mem, back.size()), 0);
  auto* word = reinterpret_cast<uint64_t*>(mem + (1 << 22) - 8);
  uint64_t old = 1;
  const uint64_t waddr = rkey->base() + (1 << 22) - 8;
  EXPECT_TRUE(r.run(work(rt::Op::AtomicAdd, nullptr, nullptr, waddr, rkey.get(), 8, 5)).ok);
  EXPECT_TRUE(r.run(work(rt::Op::FetchAdd, &old, nullptr, waddr, rkey.get(), 8, 2)).ok);
  EXPECT_EQ(old, 5u);
  EXPECT_TRUE(r.run(work(rt::Op::CompareSwap, &old, nullptr, waddr, rkey.get(), 8, 100, 7)).ok);
  EXPECT_EQ(old, 7u);
  EXPECT_TRUE(r.run(work(rt::Op::CompareSwap, &old, nullptr, waddr, rkey.get(), 8, 200, 7)).ok);
  EXPECT_EQ(old, 100u) << "a failed CAS returns the current value";
  EXPECT_TRUE(r.run(work(rt::Op::Swap, &old, nullptr, waddr, rkey.get(), 8, 9)).ok);
  EXPECT_EQ(old, 100u);
  EXPECT_EQ(*word, 9u);
  EXPECT_TRUE(r.run(work(rt::Op::Swap, nullptr, nullptr, waddr, rkey.get(), 8, 10)).ok) << "swap without a result";
  EXPECT_EQ(*word, 10u);
  EXPECT_TRUE(r.run(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0)).ok);
}

// Writes of rendezvous size, atomics and reads posted back to back, before any poll: the second
// write arrives while ops wait behind the first one's pending rendezvous, so it is held (as its
// descriptor) and received later; everything completes, reads return the written data and the
// atomics apply in posting order. (In one process a reply leaves only at the next poll, after
// the rendezvous landed, so this cannot prove the hold-back itself; the cross-process proof is
// UcxAmRanks.RendezvousPutThenNotifyIsOrdered, which fails when the hold-back is disabled.)
// Over tcp loopback, where a rendezvous really is asynchronous (UCX's self transport finishes it
// inline): the environment is set only for this transport's creation.
struct ScopedEnv {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> kv) {
    for (const auto& [k, v] : kv) {
      const char* old = std::getenv(k);
      saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(k, v, 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }
};

TEST(UcxAmTransport, AtomicsWaitForEarlierLargeWritesInPostingOrder) {
  std::optional<AmRank> made;
  {
    ScopedEnv env{{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}};
    made.emplace();
  }
  AmRank& r = *made;
  constexpr size_t kBig = size_t{2} << 20;  // above the eager bound: UCP's choice, rendezvous
  auto mr = r.tp->allocate(4 * kBig);
  auto rkey = r.tp->unpack_key(0, mr->packed_key());
  auto* mem = static_cast<uint8_t*>(mr->addr());
  for (size_t i = 0; i < kBig; ++i) mem[i] = static_cast<uint8_t>(i * 13 + 5);
  for (size_t i = 0; i < kBig; ++i) mem[kBig + i] = static_cast<uint8_t>(i * 3 + 1);
  const uint64_t word = rkey->base() + 4 * kBig - 8;
  uint64_t old[3] = {99, 99, 99};
  std::vector<uint8_t> back1(kBig), back2(kBig - 8);  // Reads right behind the writes see their data
  std::vector<rt::Work> ws = {
      work(rt::Op::Write, mem, mr.get(), rkey->base() + 2 * kBig, rkey.get(), kBig),
      work(rt::Op::FetchAdd, &old[0], nullptr, word, rkey.get(), 8, 1),
      work(rt::Op::Read, back1.data(), nullptr, rkey->base() + 2 * kBig, rkey.get(), kBig),
      work(rt::Op::Write, mem + kBig, mr.get(), rkey->base() + 3 * kBig, rkey.get(), kBig - 8),
      work(rt::Op::FetchAdd, &old[1], nullptr, word, rkey.get(), 8, 1),
      work(rt::Op::AtomicAdd, nullptr, nullptr, word, rkey.get(), 8, 1),
      work(rt::Op::Read, back2.data(), nullptr, rkey->base() + 3 * kBig, rkey.get(), kBig - 8),
      work(rt::Op::FetchAdd, &old[2], nullptr, word, rkey.get(), 8, 1),
  };
  for (size_t i = 0; i < ws.size(); ++i) {
    ws[i].cookie = i;
    ASSERT_EQ(r.tp->post(ws[i]), rt::PostResult::Ok);
  }
  std::vector<rt::Completion> done;
  for (int i = 0; i < 10000000 && done.size() < ws.size(); ++i) r.tp->poll(done);
  ASSERT_EQ(done.size(), ws.size());
  for (const auto& c : done) EXPECT_TRUE(c.ok) << c.error;
  EXPECT_EQ(old[0], 0u);
  EXPECT_EQ(old[1], 1u);
  EXPECT_EQ(old[2], 3u);
  EXPECT_EQ(std::memcmp(mem, mem + 2 * kBig, kBig), 0);
  EXPECT_EQ(std::memcmp(mem + kBig, mem + 3 * kBig, kBig - 8), 0);
  EXPECT_EQ(std::memcmp(back1.data(), mem, kBig), 0) << "a Read overtook the write before it";
  EXPECT_EQ(std::memcmp(back2.data(), mem + kBig, kBig - 8), 0) << "a Read overtook the write before it";
  EXPECT_TRUE(r.run(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0)).ok);
}

// A write that runs past the end of a window (eager and rendezvous sized) and one through a key
// whose window is gone: the target writes nothing, logs one line, and the next Flush fails.
TEST(UcxAmTransport, OutOfWindowWritesAreDroppedAndReportedAtFlush) {
  for (size_t bytes : {size_t{64}, size_t{1} << 21}) {
    SCOPED_TRACE("write of " + std::to_string(bytes) + " bytes");
    AmRank r;
    auto a = r.tp->allocate(1 << 22);
    auto b = r.tp->allocate(1 << 22);  // likely right after `a`: an overrun would land here
    auto ka = r.tp->unpack_key(0, a->packed_key());
    std::vector<uint8_t> src(bytes, 0xab);
    testing::internal::CaptureStderr();
    const uint64_t start = ka->base() + (1 << 22) - bytes / 2;  // straddles the end of `a`
    EXPECT_TRUE(r.run(work(rt::Op::Write, src.data(), nullptr, start, ka.get(), bytes)).ok)
        << "a Write completes when its source is reusable";
    const rt::Completion flush = r.run(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(flush.ok);
    EXPECT_NE(flush.error.find("rejected by the target"), std::string::npos) << flush.error;
    EXPECT_NE(err.find("dropped write from rank 0 at address 0x"), std::string::npos) << err;
    EXPECT_NE(err.find("outside every window"), std::string::npos) << err;
    EXPECT_TRUE(all_zero(a->addr(), a->bytes())) << "bytes written into the window that was overrun";
    EXPECT_TRUE(all_zero(b->addr(), b->bytes())) << "bytes written past the window";
    EXPECT_EQ(r.tp->post(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0)), rt::PostResult::PeerFailed)
        << "a failed completion makes the peer failed";
  }
  AmRank r;
  std::unique_ptr<rt::RemoteKey> stale;
  {
    auto gone = r.tp->allocate(1 << 16);
    stale = r.tp->unpack_key(0, gone->packed_key());
  }
  uint64_t v = 1;
  testing::internal::CaptureStderr();
  EXPECT_TRUE(r.run(work(rt::Op::Write, &v, nullptr, stale->base(), stale.get(), 8)).ok);
  const rt::Completion flush = r.run(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(flush.ok);
  EXPECT_NE(err.find("dropped write from rank 0"), std::string::npos) << err;
}

// Issue 23, bug 3: a flood of messages that arrive ahead of their turn (more than the 65536 the
// target once held before it dropped the rest) are all held and applied, in order, once the
// missing one arrives: none is dropped, so no update is lost and no sender stalls.
TEST(UcxAmTransport, FloodOfOutOfOrderMessagesIsHeldNotDropped) {
  using rwin::transport::ucx::AmRequest;
  using rwin::transport::ucx::AmTestAccess;
  AmRank r;
  constexpr uint64_t kEarly = (uint64_t{1} << 16) + 100;
  auto mr = r.tp->allocate((kEarly + 1) * 8);
  auto rkey = r.tp->unpack_key(0, mr->packed_key());
  const uint64_t first = AmTestAccess::next_seq(*r.tp, 0);
  const auto request = [&](uint64_t i) {
    AmRequest h;
    h.op = static_cast<uint8_t>(rt::Op::Write);
    h.sender = 0;
    h.seq = first + i;
    h.addr = rkey->base() + 8 * i;
    h.len = 8;
    return h;
  };
  for (uint64_t i = kEarly; i >= 1; --i) {  // newest first: every one is early
    uint64_t v = 1000 + i;
    EXPECT_EQ(AmTestAccess::deliver(*r.tp, request(i), &v, 8), UCS_OK);
  }
  const auto* words = static_cast<const uint64_t*>(mr->addr());
  EXPECT_EQ(words[kEarly], 0u) << "applied before its turn";
  uint64_t v0 = 1000;
  EXPECT_EQ(AmTestAccess::deliver(*r.tp, request(0), &v0, 8), UCS_OK);
  std::vector<rt::Completion> done;
  for (int i = 0; i < 1000 && AmTestAccess::next_seq(*r.tp, 0) != first + kEarly + 1; ++i) r.tp->poll(done);
  for (int i = 0; i < 100; ++i) r.tp->poll(done);  // the backlog is applied from poll()
  EXPECT_EQ(AmTestAccess::next_seq(*r.tp, 0), first + kEarly + 1);
  uint64_t missing = 0;
  for (uint64_t i = 0; i <= kEarly; ++i) missing += words[i] != 1000 + i;
  EXPECT_EQ(missing, 0u) << "of " << kEarly + 1 << " writes, " << missing << " never landed";
}

// Reads and fetching atomics outside a window get a rejection reply: the op fails, naming it.
TEST(UcxAmTransport, OutOfWindowReadsAndAtomicsFailNamingTheAddress) {
  struct Case {
    rt::Op op;
    uint64_t offset;  // from the window's base
    size_t bytes;
  };
  for (const Case& c : {Case{rt::Op::Read, 4096 - 8, 16}, Case{rt::Op::FetchAdd, 4096, 8},
                        Case{rt::Op::CompareSwap, 4, 8}}) {  // the last: inside, but not 8-byte aligned
    SCOPED_TRACE(rt::op_name(c.op));
    AmRank r;
    auto a = r.tp->allocate(4096);
    auto ka = r.tp->unpack_key(0, a->packed_key());
    std::vector<uint8_t> dst(c.bytes, 0);
    testing::internal::CaptureStderr();
    const rt::Completion done = r.run(work(c.op, dst.data(), nullptr, ka->base() + c.offset, ka.get(), c.bytes, 1, 0));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(done.ok);
    EXPECT_NE(done.error.find("rejected by the target"), std::string::npos) << done.error;
    EXPECT_NE(done.error.find(rt::op_name(c.op)), std::string::npos) << done.error;
    EXPECT_NE(done.error.find("peer 0"), std::string::npos) << done.error;
    EXPECT_NE(err.find(std::string("dropped ") + rt::op_name(c.op)), std::string::npos) << err;
    EXPECT_TRUE(all_zero(a->addr(), a->bytes()));
  }
}

// ---- batching: small Writes are staged per peer and leave with the next non-Write op ----

// Polls a while without posting anything: staged Writes must stay staged (poll() never sends
// them, or a put and its notify would be two messages again).
void idle_polls(AmRank& r) {
  std::vector<rt::Completion> done;
  for (int i = 0; i < 2000; ++i) r.tp->poll(done);
  EXPECT_TRUE(done.empty());
}

// Many small Writes complete at post() (source copied), stay staged through polls, and land
// with the atomic after them, every byte in place, the later of two overlapping writes winning.
TEST(UcxAmBatching, SmallWritesLandWithTheNextAtomic) {
  AmRank r;
  auto mr = r.tp->allocate(1 << 20);
  auto rkey = r.tp->unpack_key(0, mr->packed_key());
  auto* mem = static_cast<uint8_t*>(mr->addr());
  uint8_t* dst = mem + (1 << 19);
  const uint64_t word = rkey->base() + 8;
  std::vector<uint8_t> expect(4096, 0);
  std::vector<uint8_t> src(64);
  for (int i = 0; i < 200; ++i) {
    const size_t at = static_cast<size_t>(i) * 17 % 4000;  // overlapping: later ones must win
    const size_t n = 1 + static_cast<size_t>(i) % 64;
    for (size_t k = 0; k < n; ++k) src[k] = static_cast<uint8_t>(i * 31 + static_cast<int>(k) + 1);
    std::memcpy(expect.data() + at, src.data(), n);
    EXPECT_TRUE(r.run(work(rt::Op::Write, src.data(), nullptr, rkey->base() + (1 << 19) + at, rkey.get(), n)).ok);
    src.assign(src.size(), 0xee);  // reused at once: the Write copied it
  }
  idle_polls(r);
  EXPECT_TRUE(all_zero(dst, 4096)) << "staged writes left without a non-Write op after them";
  EXPECT_TRUE(r.run(work(rt::Op::AtomicAdd, nullptr, nullptr, word, rkey.get(), 8, 3)).ok);
  // In one process the batch is delivered by the progress that completed the atomic's send.
  for (int i = 0; i < 1000 && *reinterpret_cast<volatile uint64_t*>(mem + 8) != 3; ++i) idle_polls(r);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(mem + 8), 3u);
  EXPECT_EQ(std::memcmp(dst, expect.data(), expect.size()), 0) << "the signal arrived before every byte";
  EXPECT_TRUE(r.run(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0)).ok);
}

// A Flush alone (quiet/fence) carries staged Writes; a Read of the same address sees the Write
// posted before it.
TEST(UcxAmBatching, FlushAndReadCarryStagedWrites) {
  AmRank r;
  auto mr = r.tp->allocate(1 << 16);
  auto rkey = r.tp->unpack_key(0, mr->packed_key());
  auto* mem = static_cast<uint8_t*>(mr->addr());
  uint64_t v = 0x1122334455667788u;
  EXPECT_TRUE(r.run(work(rt::Op::Write, &v, nullptr, rkey->base() + 64, rkey.get(), 8)).ok);
  idle_polls(r);
  EXPECT_TRUE(all_zero(mem, 1 << 16));
  EXPECT_TRUE(r.run(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0)).ok);
  uint64_t got = 0;
  std::memcpy(&got, mem + 64, 8);
  EXPECT_EQ(got, v) << "a Flush completed before the write staged ahead of it";

  std::vector<uint8_t> src(3000), back(3000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 5 + 3);
  EXPECT_TRUE(r.run(work(rt::Op::Write, src.data(), nullptr, rkey->base() + 1000, rkey.get(), src.size())).ok);
  EXPECT_TRUE(r.run(work(rt::Op::Read, back.data(), nullptr, rkey->base() + 1000, rkey.get(), back.size())).ok);
  EXPECT_EQ(back, src) << "a Read overtook the staged write before it";
}

// Staged bytes are bounded: a peer's batch leaves by itself once the next Write would not fit,
// without a non-Write op, and what stays staged leaves with the Flush.
TEST(UcxAmBatching, FullBatchLeavesByItself) {
  AmRank r;
  constexpr size_t kWrite = 8 << 10;  // the largest staged write
  constexpr int kWrites = 20;         // 160 KiB: more than one batch (64 KiB)
  auto mr = r.tp->allocate(kWrites * kWrite);
  auto rkey = r.tp->unpack_key(0, mr->packed_key());
  auto* mem = static_cast<uint8_t*>(mr->addr());
  std::vector<uint8_t> src(kWrite);
  for (int i = 0; i < kWrites; ++i) {
    src.assign(kWrite, static_cast<uint8_t>(i + 1));
    EXPECT_TRUE(r.run(work(rt::Op::Write, src.data(), nullptr, rkey->base() + i * kWrite, rkey.get(), kWrite)).ok);
  }
  idle_polls(r);
  EXPECT_EQ(mem[0], 1) << "the first writes were still staged: the batch has no bound";
  EXPECT_EQ(mem[kWrite * (kWrites - 1)], 0) << "the last write left before its batch was full";
  EXPECT_TRUE(r.run(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0)).ok);
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(mem[i * kWrite], i + 1) << "write " << i;
    EXPECT_EQ(mem[i * kWrite + kWrite - 1], i + 1) << "write " << i;
  }
}

// Small (staged) and large (own message: eager and, over tcp, rendezvous) Writes to the same
// bytes, posted back to back before any poll: the target ends with the last one's data.
TEST(UcxAmBatching, InterleavedSmallAndLargeWritesKeepOrder) {
  std::optional<AmRank> made;
  {
    ScopedEnv env{{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "lo"}};
    made.emplace();
  }
  AmRank& r = *made;
  for (size_t big : {size_t{64} << 10, size_t{2} << 20}) {
    SCOPED_TRACE("large write of " + std::to_string(big) + " bytes");
    auto mr = r.tp->allocate(2 * big);
    auto rkey = r.tp->unpack_key(0, mr->packed_key());
    auto* mem = static_cast<uint8_t*>(mr->addr());
    uint8_t* large = mem + big;  // the large write's source, in the same window
    std::memset(large, 0x22, big);
    std::vector<uint8_t> a(4096, 0x11), c(4096, 0x33), d(16, 0x44);
    std::vector<rt::Work> ws = {
        work(rt::Op::Write, a.data(), nullptr, rkey->base(), rkey.get(), a.size()),          // staged
        work(rt::Op::Write, large, mr.get(), rkey->base(), rkey.get(), big),                 // overwrites a
        work(rt::Op::Write, c.data(), nullptr, rkey->base() + 100, rkey.get(), c.size()),   // over the large one
        work(rt::Op::Write, d.data(), nullptr, rkey->base() + 50, rkey.get(), d.size()),     // over the large one
        work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0),
    };
    for (size_t i = 0; i < ws.size(); ++i) {
      ws[i].cookie = i;
      ASSERT_EQ(r.tp->post(ws[i]), rt::PostResult::Ok);
    }
    std::vector<rt::Completion> done;
    for (int i = 0; i < 10000000 && done.size() < ws.size(); ++i) r.tp->poll(done);
    ASSERT_EQ(done.size(), ws.size());
    for (const auto& comp : done) EXPECT_TRUE(comp.ok) << comp.error;
    std::vector<uint8_t> expect(big, 0x22);
    std::memset(expect.data() + 100, 0x33, c.size());
    std::memset(expect.data() + 50, 0x44, d.size());
    EXPECT_EQ(std::memcmp(mem, expect.data(), big), 0) << "an earlier write landed over a later one";
  }
}

// Rule for a batch holding an out-of-window Write: every request in a batch is judged alone, as
// if sent alone. The bad Write writes nothing (not even its in-window part), the requests before
// and after it apply, the atomic that carried the batch succeeds, and the sender's next Flush
// fails (as for an out-of-window Write sent alone).
TEST(UcxAmBatching, OutOfWindowWriteInABatchIsDroppedAlone) {
  AmRank r;
  auto a = r.tp->allocate(1 << 16);
  auto b = r.tp->allocate(1 << 16);  // likely right after `a`: an overrun would land here
  auto ka = r.tp->unpack_key(0, a->packed_key());
  auto* mem = static_cast<uint8_t*>(a->addr());
  std::vector<uint8_t> first(256, 0x5a), bad(512, 0xab), last(256, 0xa5);
  testing::internal::CaptureStderr();
  EXPECT_TRUE(r.run(work(rt::Op::Write, first.data(), nullptr, ka->base(), ka.get(), first.size())).ok);
  EXPECT_TRUE(r.run(work(rt::Op::Write, bad.data(), nullptr, ka->base() + (1 << 16) - 256, ka.get(), bad.size())).ok);
  EXPECT_TRUE(r.run(work(rt::Op::Write, last.data(), nullptr, ka->base() + 1024, ka.get(), last.size())).ok);
  uint64_t old = 99;
  const rt::Completion fa = r.run(work(rt::Op::FetchAdd, &old, nullptr, ka->base() + 4096, ka.get(), 8, 1));
  const rt::Completion flush = r.run(work(rt::Op::Flush, nullptr, nullptr, 0, nullptr, 0));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(fa.ok) << fa.error;
  EXPECT_EQ(old, 0u);
  EXPECT_EQ(std::memcmp(mem, first.data(), first.size()), 0) << "the write before the bad one was lost";
  EXPECT_EQ(std::memcmp(mem + 1024, last.data(), last.size()), 0) << "the write after the bad one was lost";
  EXPECT_TRUE(all_zero(mem + (1 << 16) - 256, 256)) << "the bad write wrote its in-window part";
  EXPECT_TRUE(all_zero(b->addr(), b->bytes())) << "bytes written past the window";
  EXPECT_FALSE(flush.ok);
  EXPECT_NE(flush.error.find("rejected by the target"), std::string::npos) << flush.error;
  EXPECT_NE(err.find("dropped write from rank 0 at address 0x"), std::string::npos) << err;
  EXPECT_NE(err.find("outside every window"), std::string::npos) << err;
}

}  // namespace

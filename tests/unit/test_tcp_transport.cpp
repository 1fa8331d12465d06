// rwin's own tcp transport (transport/tcp) at the transport seam: its wire checks, and two ranks
// in one process (one thread each) moving data, with the target rank never calling the transport
// (its receiver thread serves: the passive target). Also run under TSan (tests/sanitizers.sh).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "transport/tcp/tcp_transport_impl.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"
#include "env_guard.h"
#include "socket_util.h"
#include "tcp_pair.h"

namespace {

namespace tp = rwin::transport;
namespace w = rwin::transport::tcpw;
using namespace std::chrono_literals;

// ---- wire checks --------------------------------------------------------------------------------

w::ReqHeader req(w::Req t, uint64_t len, uint64_t addr = 64) {
  w::ReqHeader h;
  h.type = static_cast<uint8_t>(t);
  h.len = len;
  h.addr = addr;
  h.region = 1;
  return h;
}

TEST(TcpWire, RequestsOfEveryKindAreCheckedBeforeAnyRegionIsLookedUp) {
  EXPECT_EQ(w::check_request(req(w::Req::Write, 4096)), "");
  EXPECT_EQ(w::check_request(req(w::Req::Read, 1)), "");
  EXPECT_EQ(w::check_request(req(w::Req::FetchAdd, 8)), "");
  EXPECT_NE(w::check_request(req(w::Req::Write, 0)).find("0 bytes"), std::string::npos);
  EXPECT_NE(w::check_request(req(w::Req::Read, w::kMaxFrameBytes + 1)).find("allowed in one frame"), std::string::npos);
  EXPECT_NE(w::check_request(req(w::Req::AtomicAdd, 4)).find("atomics are 8"), std::string::npos);
  EXPECT_NE(w::check_request(req(w::Req::Swap, 8, 68)).find("not 8-byte aligned"), std::string::npos);
  w::ReqHeader f = req(w::Req::Flush, 0, 0);
  f.region = 0;
  EXPECT_EQ(w::check_request(f), "");
  f.len = 8;
  EXPECT_NE(w::check_request(f).find("with a payload"), std::string::npos);
  w::ReqHeader bad = req(w::Req::Write, 8);
  bad.pad[1] = 1;
  EXPECT_NE(w::check_request(bad).find("padding"), std::string::npos);
  bad = req(w::Req::Write, 8);
  bad.type = 99;
  EXPECT_NE(w::check_request(bad).find("unknown request type 99"), std::string::npos);
  // put(Add) the target applies: its payload is held whole, so it is bounded tighter than a write's.
  w::ReqHeader add = req(w::Req::WriteAdd, w::kMaxAddFrameBytes);
  add.operand = 4;
  EXPECT_EQ(w::check_request(add), "");
  add.len = w::kMaxAddFrameBytes + 1;
  EXPECT_NE(w::check_request(add).find("allowed in one frame"), std::string::npos);
  add.len = 0;
  EXPECT_NE(w::check_request(add).find("0 bytes"), std::string::npos);
  add.len = 8;
  add.operand = 256;
  EXPECT_NE(w::check_request(add).find("element type code 256"), std::string::npos);
}

TEST(TcpWire, RepliesAndHellosAreChecked) {
  w::RepHeader r;
  r.type = static_cast<uint8_t>(w::Rep::Value);
  EXPECT_EQ(w::check_reply(r), "");
  r.len = 3;
  EXPECT_NE(w::check_reply(r), "");
  r.type = static_cast<uint8_t>(w::Rep::Refused);
  EXPECT_EQ(w::check_reply(r), "");
  r.len = w::kMaxRefusalBytes + 1;
  EXPECT_NE(w::check_reply(r).find("refusal"), std::string::npos);
  r.type = 0;
  EXPECT_NE(w::check_reply(r).find("unknown reply type"), std::string::npos);

  w::Hello h;
  h.src = 1;
  h.dst = 0;
  EXPECT_EQ(w::check_hello(h, 0, 2), "");
  EXPECT_NE(w::check_hello(h, 1, 2).find("meant for rank 0, this is rank 1"), std::string::npos);
  h.src = 2;
  EXPECT_NE(w::check_hello(h, 0, 2).find("outside the job of 2"), std::string::npos);
  h.src = 1;
  h.version = 9;
  EXPECT_NE(w::check_hello(h, 0, 2).find("wire version 9"), std::string::npos);
  h.version = w::kVersion;
  h.magic = 0x47455420;  // "GET ": an HTTP client
  EXPECT_NE(w::check_hello(h, 0, 2).find("not an rwin tcp hello"), std::string::npos);
}

TEST(TcpWire, InsideNeverOverflows) {
  const uint64_t top = std::numeric_limits<uint64_t>::max();
  EXPECT_TRUE(w::inside(1000, 100, 1000, 100));
  EXPECT_TRUE(w::inside(1000, 100, 1099, 1));
  EXPECT_FALSE(w::inside(1000, 100, 1099, 2));
  EXPECT_FALSE(w::inside(1000, 100, 999, 1));
  EXPECT_FALSE(w::inside(1000, 100, top - 4, 8));  // addr + len wraps
  EXPECT_FALSE(w::inside(1000, 100, 1000, top));
  EXPECT_FALSE(w::inside(top - 10, 100, top - 10, 11 + 100));
}

// ---- two ranks in one process (tcp_pair.h) ------------------------------------------------------

using rwin_tcp_test::Pair;
using rwin_tcp_test::start_up_error;
using rwin_tcp_test::TcpRank;
using rwin_tcp_test::unconnected_config;
using rwin_tcp_test::work;

TEST(TcpTransport, WritesReadsAndAtomicsLandWithoutTheTargetCallingTheTransport) {
  Pair p;
  // Rank 1's thread is gone: only its receiver thread can serve.
  std::vector<char> src(300001);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  ASSERT_TRUE(p.run(work(tp::Op::Write, src.data(), p.at1(4096), src.size())).ok);
  ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);
  EXPECT_EQ(std::memcmp(p.mem(1) + 4096, src.data(), src.size()), 0);
  EXPECT_EQ(p.mem(1)[4095], 0) << "nothing lands before the range";
  EXPECT_EQ(p.mem(1)[4096 + src.size()], 0) << "nothing lands after the range";

  std::vector<char> back(src.size());
  ASSERT_TRUE(p.run(work(tp::Op::Read, back.data(), p.at1(4096), back.size())).ok);
  EXPECT_EQ(back, src);

  uint64_t old = 0;
  ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 5)).ok);
  EXPECT_EQ(old, 0u);
  ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 7)).ok);
  EXPECT_EQ(old, 5u);
  ASSERT_TRUE(p.run(work(tp::Op::Swap, &old, p.at1(0), 8, 100)).ok);
  EXPECT_EQ(old, 12u);
  ASSERT_TRUE(p.run(work(tp::Op::CompareSwap, &old, p.at1(0), 8, 200, 99)).ok);  // fails: 100 != 99
  EXPECT_EQ(old, 100u);
  ASSERT_TRUE(p.run(work(tp::Op::CompareSwap, &old, p.at1(0), 8, 200, 100)).ok);
  EXPECT_EQ(old, 100u);
  uint64_t now = 0;
  std::memcpy(&now, p.mem(1), 8);
  EXPECT_EQ(now, 200u);
}

TEST(TcpTransport, AnAtomicAfterWritesIsAppliedAfterThemWithNoFlush) {
  Pair p;
  ASSERT_TRUE(p.r[0].t->write_then_atomic_ordered(1));
  std::vector<uint32_t> src(100000);
  for (int round = 1; round <= 20; ++round) {
    for (auto& x : src) x = static_cast<uint32_t>(round);
    ASSERT_TRUE(p.run(work(tp::Op::Write, src.data(), p.at1(64), src.size() * 4)).ok);
    ASSERT_TRUE(p.run(work(tp::Op::AtomicAdd, nullptr, p.at1(0), 8, 1)).ok);
    // The target's memory as its owner sees it: once the flag moved, the data is all there.
    auto* flag = reinterpret_cast<uint64_t*>(p.mem(1));
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < static_cast<uint64_t>(round) && std::chrono::steady_clock::now() < until) {
    }
    ASSERT_EQ(__atomic_load_n(flag, __ATOMIC_ACQUIRE), static_cast<uint64_t>(round));
    const auto* got = reinterpret_cast<const uint32_t*>(p.mem(1) + 64);
    for (size_t i = 0; i < src.size(); i += 997) ASSERT_EQ(got[i], static_cast<uint32_t>(round)) << i;
    ASSERT_EQ(got[src.size() - 1], static_cast<uint32_t>(round));
  }
}

// A job's rank reaches its own windows with the CPU (rma_mode "direct", as UCX's shared memory): the
// address it gets is its own, inside the region only, and nothing for another rank or a freed region.
TEST(TcpTransport, ARankMapsItsOwnRegionsAndNoOneElses) {
  Pair p;
  tp::Transport& t0 = *p.r[0].t;
  EXPECT_EQ(t0.rma_mode(0), "direct");
  EXPECT_EQ(t0.rma_mode(1), "native");
  const auto own = t0.unpack_key(0, p.r[0].window->packed_key());
  EXPECT_EQ(t0.mapped(0, *own, own->base() + 64, 8), p.mem(0) + 64);
  EXPECT_EQ(t0.mapped(0, *own, own->base(), Pair::kBytes), p.mem(0));
  EXPECT_EQ(t0.mapped(0, *own, own->base() + Pair::kBytes - 8, 16), nullptr) << "past the region's end";
  EXPECT_EQ(t0.mapped(0, *own, own->base() - 8, 8), nullptr) << "before its start";
  EXPECT_EQ(t0.mapped(1, *p.key_of_1, p.at1(0), 8), nullptr) << "another rank's memory is not mapped here";
  auto extra = t0.allocate(4096);
  const auto extra_key = t0.unpack_key(0, extra->packed_key());
  EXPECT_EQ(t0.mapped(0, *extra_key, extra_key->base(), 4096), extra->addr());
  extra.reset();
  EXPECT_EQ(t0.mapped(0, *extra_key, extra_key->base(), 4096), nullptr) << "a freed region";
}

// A poll that hands back completions may skip looking for arrivals, but only every other time: a
// rank whose every poll returns a completion (a stream of small writes, each done in post()) still
// serves a peer's read. Its receiver thread naps while its owner polls, so a poll that never looked
// would leave the read to the thread, which serves only once the owner is away 200 us: with the
// alternation removed this took 1007 ms (the stream's thread preempted at last), with it 15 ms. What
// is asserted is the liveness both give, and that every poll still returned its completion.
TEST(TcpTransport, APollThatHandsBackCompletionsStillServesArrivals) {
  Pair p;
  std::memcpy(p.mem(0) + 256, "served!", 8);
  std::atomic<bool> read_done{false};
  std::string read_error;
  char got[8] = {};
  std::atomic<size_t> polls{0};
  std::thread rank1([&] {
    // Sent once rank 0 is well inside its stream, so its receiver thread naps (its owner polls).
    const auto start_by = std::chrono::steady_clock::now() + 20s;
    while (polls.load() < 1000 && std::chrono::steady_clock::now() < start_by) std::this_thread::yield();
    tp::Work w = work(tp::Op::Read, got, p.key_of_0->base() + 256, 8);
    w.peer = 0;
    w.rkey = p.key_of_0.get();
    w.cookie = 77;
    if (p.r[1].t->post(w) != tp::PostResult::Ok) {
      read_error = "post: " + p.r[1].t->peer_error(0);
    } else {
      const tp::Completion c = p.wait(w.cookie, 1);
      if (!c.ok) read_error = c.error;
      read_done.store(c.ok);
    }
  });
  const uint64_t one = 1;
  std::vector<tp::Completion> done;
  size_t completions = 0;
  const auto until = std::chrono::steady_clock::now() + 25s;
  while (!read_done.load() && read_error.empty() && std::chrono::steady_clock::now() < until) {
    tp::Work w = work(tp::Op::Write, const_cast<uint64_t*>(&one), p.at1(512), 8);
    ASSERT_EQ(p.post(w), tp::PostResult::Ok);
    p.r[0].t->poll(done);
    ++polls;
    completions += done.size();
    done.clear();
  }
  rank1.join();
  ASSERT_TRUE(read_done.load()) << read_error;
  EXPECT_EQ(std::memcmp(got, "served!", 8), 0);
  EXPECT_EQ(completions, polls.load()) << "every poll of the stream handed back its write's completion";
}

// Reads a word of a window while the peer's receiver thread may be copying into it: how this test
// watches for a write that nothing else announces. A plain load outside TSan's view (the transport's
// memcpy is not atomic, so TSan would report the watch itself); what is checked afterwards is read after
// a flush's completion.
__attribute__((no_sanitize("thread"))) uint64_t watch_word(const char* p) {
  return *reinterpret_cast<const volatile uint64_t*>(p);
}
// The same for one byte (any address: a word load must be 8-byte aligned).
__attribute__((no_sanitize("thread"))) char watch_byte(const char* p) { return *static_cast<const volatile char*>(p); }

// Small writes wait for the op after them (they leave with it), but never more than kMaxHeld: a burst
// of them leaves as it is posted, with no poll, flush or later op from the initiator.
TEST(TcpTransport, AtMostKMaxHeldSmallWritesWaitForAnOpAfterThem) {
  Pair p;
  constexpr size_t kHeld = tp::tcp::SendItem::kMaxHeld;
  std::vector<std::vector<uint64_t>> src(kHeld, std::vector<uint64_t>(8));
  for (size_t i = 0; i < kHeld; ++i) {
    for (auto& x : src[i]) x = 0x5157'0000'0000'0000ull + i + 1;
    tp::Work w = work(tp::Op::Write, src[i].data(), p.at1(4096 * i), 64);
    ASSERT_EQ(p.post(w), tp::PostResult::Ok) << i;
  }
  // Neither rank calls the transport from here: rank 1's receiver thread lands what rank 0 sent.
  const char* last = p.mem(1) + 4096 * (kHeld - 1) + 56;
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (watch_word(last) != src[kHeld - 1][7] && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  const bool left_unflushed = watch_word(last) == src[kHeld - 1][7];
  ASSERT_TRUE(left_unflushed) << "the last of " << kHeld << " small writes did not land with no op after it";
  ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);  // orders the checks below after the landing
  for (size_t i = 0; i < kHeld; ++i) EXPECT_EQ(std::memcmp(p.mem(1) + 4096 * i, src[i].data(), 64), 0) << i;
}

// A Write of up to kInline bytes (16 KiB and a collective message's header) is copied into its frame
// and done at post: the caller may reuse its buffer at once, and the frame waits for the op after it
// (one sendmsg with the notify). One byte more leaves from the caller's buffer, at once.
TEST(TcpTransport, AWriteOfUpToKInlineBytesIsCopiedAtPostAndLeavesWithTheOpAfterIt) {
  Pair p;
  constexpr size_t kIn = tp::tcp::SendItem::kInline;
  static_assert(kIn >= 16 * 1024, "a collective's 16 KiB message and its header ride with its notify");
  std::vector<char> small(kIn), large(kIn + 1);
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<char>('a' + i % 26);
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>('A' + i % 26);
  tp::Work w = work(tp::Op::Write, small.data(), p.at1(0), kIn);
  ASSERT_EQ(p.post(w), tp::PostResult::Ok);
  std::vector<tp::Completion> done;
  p.r[0].t->poll(done);  // done at post: the first poll hands it back
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].ok);
  EXPECT_EQ(done[0].cookie, w.cookie);
  const std::vector<char> posted = small;
  std::fill(small.begin(), small.end(), 0);  // reused: what lands is what was posted
  static_assert(kIn % 8 == 0, "its last word is watched");
  uint64_t tail = 0;
  std::memcpy(&tail, posted.data() + kIn - 8, 8);
  std::this_thread::sleep_for(100ms);
  EXPECT_NE(watch_word(p.mem(1) + kIn - 8), tail) << "a held write left with no op after it";
  const uint64_t big_at = 64 * 1024;
  ASSERT_TRUE(p.run(work(tp::Op::Write, large.data(), p.at1(big_at), large.size())).ok);
  const char* last = p.mem(1) + big_at + kIn;  // its last byte, one past kInline
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (watch_byte(last) != large[kIn] && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(watch_byte(last), large[kIn]) << "one byte past kInline leaves at once";
  ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);  // orders the checks below after the landing
  EXPECT_EQ(std::memcmp(p.mem(1) + big_at, large.data(), large.size()), 0);
  EXPECT_EQ(std::memcmp(p.mem(1), posted.data(), kIn), 0);
}

TEST(TcpTransport, AWriteOutsideTheTargetsRegionIsRefusedByTheTargetAndNamed) {
  Pair p;
  // The core checks slices before it posts; this is the target's own defence against a peer that did not.
  std::vector<char> src(4096, 'x');
  const auto c = p.run(work(tp::Op::Write, src.data(), p.at1(Pair::kBytes - 100), src.size()));
  EXPECT_TRUE(c.ok) << "a write completes once sent: " << c.error;
  const auto f = p.run(work(tp::Op::Flush, nullptr, 0, 0));
  ASSERT_FALSE(f.ok);
  for (const char* part : {"rank 0 -> peer 1", "rank 1 refused it", "write of 4096 bytes at offset 1048476",
                           "(1048576 bytes)"}) {
    EXPECT_NE(f.error.find(part), std::string::npos) << part << " missing in: " << f.error;
  }
  for (size_t i = 0; i < Pair::kBytes; i += 4096) ASSERT_EQ(p.mem(1)[i], 0) << "nothing landed at " << i;
  EXPECT_EQ(p.mem(1)[Pair::kBytes - 1], 0);
  EXPECT_EQ(p.r[0].t->post(work(tp::Op::Flush, nullptr, 0, 0)), tp::PostResult::PeerFailed);
}

// A RegionAdder for the transport's own tests: adds u64 elements (type code 3) and refuses any other code.
struct U64Adder final : tp::RegionAdder {
  char* base;
  explicit U64Adder(char* b) : base(b) {}
  std::string add(uint64_t code, uint64_t off, const char* src, uint64_t bytes) const noexcept override {
    if (code != 3) return "type code " + std::to_string(code) + " refused by the test adder";
    for (uint64_t i = 0; i < bytes; i += 8) {
      uint64_t a = 0, b = 0;
      std::memcpy(&a, base + off + i, 8);
      std::memcpy(&b, src + i, 8);
      a += b;
      std::memcpy(base + off + i, &a, 8);
    }
    return {};
  }
};

// Op::Accumulate (put(Add) applied by the target): the receiver thread hands the whole payload to the
// region's adder, small (sent with the flush) and large (more than one socket read); a region that
// was never armed refuses it, and so does the adder; nothing lands either time.
TEST(TcpTransport, AccumulateIsAddedByTheRegionsAdderAndRefusedWhereNoneTakesIt) {
  Pair p;
  EXPECT_EQ(p.r[0].t->capabilities().max_add_bytes, w::kMaxAddFrameBytes);
  p.r[1].t->accept_adds(*p.r[1].window, std::make_shared<U64Adder>(p.mem(1)));
  std::vector<uint64_t> src(w::kMaxAddFrameBytes / 8);
  for (size_t i = 0; i < src.size(); ++i) src[i] = i * 3 + 1;
  tp::Work small = work(tp::Op::Accumulate, src.data(), p.at1(8), 24, 3);
  ASSERT_TRUE(p.run(small).ok);
  ASSERT_TRUE(p.run(small).ok);
  tp::Work large = work(tp::Op::Accumulate, src.data(), p.at1(0), src.size() * 8, 3);
  ASSERT_TRUE(p.run(large).ok);
  ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);
  const auto* got = reinterpret_cast<const uint64_t*>(p.mem(1));
  for (size_t i = 0; i < src.size(); ++i) {
    const uint64_t want = src[i] + (i >= 1 && i <= 3 ? 2 * src[i - 1] : 0);
    ASSERT_EQ(got[i], want) << "element " << i;
  }
  // Larger than one frame: refused at the initiator, before anything is sent.
  src.push_back(0);
  const auto big = p.run(work(tp::Op::Accumulate, src.data(), p.at1(0), src.size() * 8, 3));
  EXPECT_FALSE(big.ok);
  EXPECT_NE(big.error.find("at most 1048576 bytes"), std::string::npos) << big.error;

  // The adder's refusal fails the peer, naming the region, the offset and the reason.
  ASSERT_TRUE(p.run(work(tp::Op::Accumulate, src.data(), p.at1(64), 16, 5)).ok);
  const auto f = p.run(work(tp::Op::Flush, nullptr, 0, 0));
  ASSERT_FALSE(f.ok);
  for (const char* part : {"rank 1 refused it", "write_add of 16 bytes at offset 64", "type code 5 refused"}) {
    EXPECT_NE(f.error.find(part), std::string::npos) << part << " missing in: " << f.error;
  }
  EXPECT_EQ(got[8], src[8]) << "the refused add left the element as it was";
}

TEST(TcpTransport, AnAccumulateIntoARegionThatTakesNoAddsIsRefused) {
  Pair p;  // rank 1's window was never armed with accept_adds
  std::vector<uint64_t> src(512, 1);
  ASSERT_TRUE(p.run(work(tp::Op::Accumulate, src.data(), p.at1(0), src.size() * 8, 3)).ok);
  const auto f = p.run(work(tp::Op::Flush, nullptr, 0, 0));
  ASSERT_FALSE(f.ok);
  EXPECT_NE(f.error.find("which takes no put(Add)"), std::string::npos) << f.error;
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(p.mem(1)[i], 0) << "nothing landed at " << i;
}

TEST(TcpTransport, ARegionFreedWhileAWriteIntoItIsUnderWayIsNeverWrittenAndTheConnectionStaysInStep) {
  Pair p;
  // A second region of rank 1's, far larger than what the sockets buffer, so its payload takes a
  // while to pass (post() sends until the socket is full; the rest leaves while rank 0 polls).
  constexpr size_t kBig = 64u << 20;
  auto victim = p.r[1].t->allocate(kBig);
  const auto key = p.r[0].t->unpack_key(1, victim->packed_key());
  const uint32_t region = dynamic_cast<const tp::tcp::TcpKey&>(*key).region();
  std::vector<char> big(kBig, '\x5a');
  tp::Work w = work(tp::Op::Write, big.data(), key->base(), big.size());
  w.peer = 1;
  w.rkey = key.get();
  w.cookie = ++p.cookie;
  // Rank 1's owner (this thread stands in for it) frees the region 2 ms after its receiver thread
  // first woke for the write: usually mid-payload. Whether the free comes before the header, during
  // or after the payload is still the scheduler's choice: what is asserted below holds in each case.
  const auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
  const uint64_t wakes_before = t1.receiver_wakes();
  std::thread owner1([&] {
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (t1.receiver_wakes() == wakes_before && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(50us);
    }
    std::this_thread::sleep_for(2ms);
    victim.reset();  // from here no byte may land there (ASan, or a fault, would catch one that does)
  });
  const tp::PostResult posted = p.r[0].t->post(w);
  owner1.join();
  ASSERT_EQ(posted, tp::PostResult::Ok);

  // The write completes (sent; the target discards the rest) or fails with rank 1's refusal,
  // which names the region (the free came before its header was read). Its Flush says the same.
  const std::string names_region = "region " + std::to_string(region);
  std::string refusal;
  const tp::Completion c = p.wait(w.cookie);
  if (!c.ok) {
    refusal = c.error;
  } else {
    const tp::Completion f = p.run(work(tp::Op::Flush, nullptr, 0, 0));
    if (!f.ok) refusal = f.error;
  }
  if (!refusal.empty()) {
    RecordProperty("freed", "before the header: refused");
    for (const std::string& part : {std::string("rank 1 refused it"), names_region, std::string("freed")}) {
      EXPECT_NE(refusal.find(part), std::string::npos) << part << " missing in: " << refusal;
    }
    // A refusal fails the peer (transport.h): nothing more goes to it.
    EXPECT_EQ(p.r[0].t->post(work(tp::Op::Flush, nullptr, 0, 0)), tp::PostResult::PeerFailed);
    EXPECT_NE(p.r[0].t->peer_error(1).find(names_region), std::string::npos) << p.r[0].t->peer_error(1);
    return;
  }
  RecordProperty("freed", "during or after the payload: discarded");
  // The discarded payload was consumed to its end: the next request is read as one, and its bytes
  // land exactly where they should in the live window, and nowhere else.
  std::vector<char> src(300001);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 13 + 1);
  ASSERT_TRUE(p.run(work(tp::Op::Write, src.data(), p.at1(8192), src.size())).ok);
  const auto f = p.run(work(tp::Op::Flush, nullptr, 0, 0));
  ASSERT_TRUE(f.ok) << f.error;
  EXPECT_EQ(std::memcmp(p.mem(1) + 8192, src.data(), src.size()), 0);
  for (size_t i = 0; i < Pair::kBytes; ++i) {
    if (i >= 8192 && i < 8192 + src.size()) continue;
    ASSERT_EQ(p.mem(1)[i], 0) << "a byte landed at " << i << " of the live window";
  }
  uint64_t old = 7;
  ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);
  EXPECT_EQ(old, 0u);
  EXPECT_EQ(p.r[0].t->peer_error(1), "");
}

TEST(TcpTransport, ADeadPeerFailsWhatWaitsForItAndIsNamed) {
  Pair p;
  std::vector<char> dst(64);
  p.r[1].t->quiesce(false);  // rank 1 goes away without a goodbye: its sockets close
  const auto c = p.run(work(tp::Op::Read, dst.data(), p.at1(0), dst.size()));
  ASSERT_FALSE(c.ok);
  EXPECT_NE(c.error.find("rank 0 -> peer 1"), std::string::npos) << c.error;
  EXPECT_NE(p.r[0].t->peer_error(1).find("closed"), std::string::npos) << p.r[0].t->peer_error(1);
  // Rank 0 still reaches itself.
  std::vector<char> mine(64, 'a');
  tp::Work w = work(tp::Op::Write, mine.data(), p.key_of_0->base(), mine.size());
  w.peer = 0;
  w.rkey = p.key_of_0.get();
  EXPECT_EQ(p.r[0].t->post(w), tp::PostResult::Ok);
}

TEST(TcpTransport, AfterStartUpTheListenerIsClosedSoStrangersHaveNothingToKnockOn) {
  Pair p;
  const std::string d = p.r[0].t->describe();  // "tcp(127.0.0.1:PORT)"
  const auto colon = d.rfind(':');
  ASSERT_NE(colon, std::string::npos) << d;
  const int port = std::stoi(d.substr(colon + 1));
  // The receiver thread closes it once every rank is in; give it a bounded moment.
  bool refused = false;
  for (int i = 0; i < 200 && !refused; ++i) {
    const int fd = test_sock::connect_loopback(static_cast<uint16_t>(port));
    refused = fd < 0;
    if (fd >= 0) ::close(fd);
    if (!refused) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(refused) << "port " << port << " still accepts connections";
  // And the job still works.
  uint64_t old = 1;
  EXPECT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);
  EXPECT_EQ(old, 0u);
}

// Blocking helpers for the hand-made peer below (the socket has a 10 s receive/send timeout).
using test_sock::io;
int dial(uint16_t port) { return test_sock::connect_loopback(port, 10); }
// True when the server closes `fd` without accepting: EOF (or a reset) before `n` more bytes.
bool closed_by_server(int fd) {
  char b[64];
  for (;;) {
    const ssize_t r = ::recv(fd, b, sizeof b, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
    if (r < 0) return false;  // the 10 s timeout: still open
  }
}

TEST(TcpTransport, StrangersAtTheListenerDuringStartUpAreDroppedAndOnlyTheRealRankCompletesIt) {
  // Connections one per direction, so this thread's rank 1 dials rank 0 after the strangers (a duplex
  // pair is dialled by its lower rank: RanksWithDifferentDuplexSettingsFailToConnectNamingBoth).
  rwin::test::EnvGuard env;
  env.set("RWIN_TCP_DUPLEX", "0");
  const uint16_t port = test_sock::free_port();
  const auto root = rwin::bootstrap::HostPort::parse("127.0.0.1:" + std::to_string(port));
  std::unique_ptr<tp::Transport> t0;
  std::unique_ptr<rwin::bootstrap::Bootstrap> bs0;
  std::atomic<bool> connected{false};
  std::string err0;
  std::thread rank0([&] {
    try {
      bs0 = std::make_unique<rwin::bootstrap::Bootstrap>(0, 2, root, 20000ms);
      tp::TransportConfig cfg;
      cfg.name = "tcp";
      cfg.rank = 0;
      cfg.nranks = 2;
      cfg.ifname = "lo";
      t0 = tp::make_transport(cfg);
      t0->connect(*bs0);
      connected = true;
    } catch (const std::exception& e) {
      err0 = e.what();
    }
  });
  // This thread plays rank 1 by hand: its endpoint is a listener of its own, with a known secret.
  rwin::bootstrap::Bootstrap bs1(1, 2, root, 20000ms);
  uint16_t lport = 0;
  const int lst = test_sock::listen_loopback(4, &lport);
  ASSERT_GE(lst, 0);
  w::JobEndpoint job;  // one connection to each rank (RWIN_TCP_SOCKETS unset)
  w::Endpoint& me = job.e;
  me.rank = 1;
  me.port = lport;
  me.ipv4 = htonl(INADDR_LOOPBACK);
  rwin::bootstrap::auth::random_bytes(me.secret, sizeof me.secret);
  const auto all = bs1.allgather(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&job), sizeof job));
  w::JobEndpoint job0;
  ASSERT_EQ(all[0].size(), sizeof job0);
  std::memcpy(&job0, all[0].data(), sizeof job0);
  ASSERT_EQ(job0.sockets, 1u);
  const w::Endpoint& ep0 = job0.e;
  const std::string s0(reinterpret_cast<const char*>(ep0.secret), sizeof ep0.secret);
  const std::string s1(reinterpret_cast<const char*>(me.secret), sizeof me.secret);

  // Rank 0 dials "rank 1": answer as rank 1 would (it must see proof that this is rank 1 of the job).
  {
    int fd = ::accept(lst, nullptr, nullptr);
    ASSERT_GE(fd, 0);
    w::Hello h;
    ASSERT_TRUE(io(fd, &h, sizeof h, false));
    EXPECT_EQ(h.src, 0);
    EXPECT_EQ(h.dst, 1);
    w::Challenge c;
    rwin::bootstrap::auth::random_bytes(c.nonce, sizeof c.nonce);
    ASSERT_TRUE(io(fd, &c, sizeof c, true));
    w::Proof pr;
    ASSERT_TRUE(io(fd, &pr, sizeof pr, false));
    const w::Transcript tr(h.nonce, c.nonce, 0, 1);
    const auto want = rwin::bootstrap::auth::hmac(s1, "rwin-tcp-client", tr.bytes);
    EXPECT_TRUE(rwin::bootstrap::auth::equal(pr.mac, want.data(), want.size())) << "rank 0 proved nothing";
    w::Accept a;
    const auto mine = rwin::bootstrap::auth::hmac(s1, "rwin-tcp-server", tr.bytes);
    std::memcpy(a.mac, mine.data(), mine.size());
    ASSERT_TRUE(io(fd, &a, sizeof a, true));
    ::close(fd);  // this test never serves rank 0's requests
  }

  // Strangers at rank 0's listener: garbage, a hello for another rank, a wrong proof.
  // A Hello's worth of bytes each time (all of it is read, so the close is a FIN and the refusal arrives).
  const auto refused = [&](const void* hello) {
    int fd = dial(ep0.port);
    w::Challenge c;
    const bool ok = fd >= 0 && io(fd, const_cast<void*>(hello), sizeof(w::Hello), true) &&
                    io(fd, &c, sizeof c, false) && c.status != 0 && closed_by_server(fd);
    if (fd >= 0) ::close(fd);
    return ok;
  };
  std::vector<char> junk(sizeof(w::Hello), '\xff');
  EXPECT_TRUE(refused(junk.data())) << "garbage got a challenge, or the connection stayed open";
  w::Hello elsewhere;
  elsewhere.src = 1;
  elsewhere.dst = 5;
  EXPECT_TRUE(refused(&elsewhere)) << "a hello for rank 5 got a challenge, or the connection stayed open";
  {
    int fd = dial(ep0.port);
    w::Hello h;
    h.src = 1;
    h.dst = 0;
    ASSERT_TRUE(io(fd, &h, sizeof h, true));
    w::Challenge c;
    ASSERT_TRUE(io(fd, &c, sizeof c, false));
    EXPECT_EQ(c.status, 0);
    w::Proof wrong;  // all zero: not HMAC(secret of rank 0, ...)
    ASSERT_TRUE(io(fd, &wrong, sizeof wrong, true));
    EXPECT_TRUE(closed_by_server(fd)) << "a wrong proof was not dropped";
    ::close(fd);
  }
  EXPECT_FALSE(connected.load()) << "rank 0 finished its start-up without rank 1";

  // The real rank 1 proves the secret rank 0 published; rank 0's start-up then completes.
  int fd = dial(ep0.port);
  w::Hello h;
  h.src = 1;
  h.dst = 0;
  rwin::bootstrap::auth::random_bytes(h.nonce, sizeof h.nonce);
  ASSERT_TRUE(io(fd, &h, sizeof h, true));
  w::Challenge c;
  ASSERT_TRUE(io(fd, &c, sizeof c, false));
  ASSERT_EQ(c.status, 0);
  const w::Transcript tr(h.nonce, c.nonce, 1, 0);
  w::Proof pr;
  const auto mac = rwin::bootstrap::auth::hmac(s0, "rwin-tcp-client", tr.bytes);
  std::memcpy(pr.mac, mac.data(), mac.size());
  ASSERT_TRUE(io(fd, &pr, sizeof pr, true));
  w::Accept a;
  ASSERT_TRUE(io(fd, &a, sizeof a, false));
  const auto want = rwin::bootstrap::auth::hmac(s0, "rwin-tcp-server", tr.bytes);
  EXPECT_TRUE(rwin::bootstrap::auth::equal(a.mac, want.data(), want.size())) << "rank 0 did not prove itself";
  rank0.join();
  EXPECT_TRUE(connected.load()) << err0;
  ::close(fd);
  ::close(lst);
  if (t0) t0->quiesce(false);
}

// More ranks than CPUs on the host (Transport::set_oversubscribed, from the core's start-up count):
// the owner still serves its arrivals from its polls, and its receiver thread counts it away only after
// a gap of 2 ms instead of 200 us (a rank sharing its core is descheduled that long while it waits).
// (Data moves through both paths in every tcp test: 2 ranks, and 5-8 on 2 cores.)
TEST(TcpTransport, OnAnOversubscribedHostTheOwnerServesAndItsThreadWaitsLonger) {
  Pair p;
  auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
  EXPECT_TRUE(t1.owner_serves());
  EXPECT_EQ(t1.owner_window(), 200us);
  t1.set_oversubscribed(true);
  EXPECT_TRUE(t1.owner_serves()) << "oversubscribed, the owner must keep serving itself";
  EXPECT_EQ(t1.owner_window(), 2ms);
  std::atomic<bool> polling{false}, stop{false};
  std::thread owner([&] {  // rank 1's owner is present the whole time
    std::vector<tp::Completion> done;
    while (!stop.load()) {
      p.r[1].t->poll(done);
      done.clear();
      polling.store(true);
    }
  });
  while (!polling.load()) std::this_thread::yield();
  std::vector<char> src(64);
  for (int i = 0; i < 20; ++i) {
    std::memset(src.data(), i + 1, src.size());
    ASSERT_TRUE(p.run(work(tp::Op::Write, src.data(), p.at1(static_cast<size_t>(i) * 64), src.size())).ok);
  }
  ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);
  stop.store(true);
  owner.join();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(p.mem(1)[i * 64 + 63], static_cast<char>(i + 1)) << "write " << i;
  t1.set_oversubscribed(false);
  EXPECT_EQ(t1.owner_window(), 200us);
}

// A waiting owner peeks the small requests that ask for no answer and reads them for good at its next
// look at the socket (pump/unpeek: the ACK leaves after the owner's answer). Whoever reads next --
// the owner again, or its receiver thread once the owner left -- reads the peeked bytes exactly once:
// the stream stays in step (a byte read twice or skipped would be a protocol error and fail the
// peer) through small writes, atomics, a large write landing straight into the window after a
// peek, a read and a flush.
TEST(TcpTransport, PeekedRequestsAreReadOnceWhoeverReadsNext) {
  // Only a connection that carries requests one way is peeked (a duplex one's answers carry the ACK).
  rwin::test::EnvGuard env;
  env.set("RWIN_TCP_DUPLEX", "0");
  Pair p;
  auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
  uint64_t* counter = reinterpret_cast<uint64_t*>(p.mem(1) + 8192);
  // Rank 1's owner (this thread) and rank 0 poll by turns until rank 0's completion of `cookie`
  // came and `landed()` holds (bounded: 20 s); the completion, or a failed one.
  auto both_until = [&](uint64_t cookie, auto landed) {
    std::vector<tp::Completion> done;
    std::optional<tp::Completion> mine;
    const auto until = std::chrono::steady_clock::now() + 20s;
    while ((!mine || !landed()) && std::chrono::steady_clock::now() < until) {
      p.r[1].t->poll(done);
      done.clear();
      p.r[0].t->poll(done);
      for (const auto& c : done) {
        if (c.cookie == cookie) mine = c;
      }
      done.clear();
    }
    return mine && landed() ? *mine : tp::Completion{cookie, false, "not complete within 20 s"};
  };
  // Rank 0 sends an 8-byte write then an add to the counter (one sendmsg), and both poll until the
  // add landed and rank 0's sends completed.
  uint64_t adds = 0, value = 0;
  auto small_round = [&] {
    ++value;
    tp::Work wr = work(tp::Op::Write, &value, p.at1(16 * (value % 64)), 8);
    tp::Work add = work(tp::Op::AtomicAdd, nullptr, p.at1(8192), 8, 1);
    ASSERT_EQ(p.post(wr), tp::PostResult::Ok);
    ASSERT_EQ(p.post(add), tp::PostResult::Ok);
    ++adds;
    const tp::Completion c =
        both_until(add.cookie, [&] { return __atomic_load_n(counter, __ATOMIC_ACQUIRE) == adds; });
    ASSERT_TRUE(c.ok) << c.error;
    uint64_t got;
    std::memcpy(&got, p.mem(1) + 16 * (value % 64), 8);
    ASSERT_EQ(got, value) << "the write before the add";
  };
  // Until the owner has peeked (its receiver thread serves instead when this thread is away for
  // longer than the owner window, which a loaded machine may do now and then).
  for (int i = 0; i < 1000 && t1.peeks() == 0; ++i) small_round();
  ASSERT_GT(t1.peeks(), 0u) << "rank 1's owner never peeked a request";
  for (int i = 0; i < 20; ++i) small_round();  // the owner reads what it peeked as it reads on

  // Its owner gone (this thread polls rank 0 only), the receiver thread reads what the owner last
  // peeked, then a large write, a read, a fetching add and a flush.
  std::vector<char> big(300001);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 13 + 5);
  ASSERT_TRUE(p.run(work(tp::Op::Write, big.data(), p.at1(65536), big.size())).ok);
  std::vector<char> back(big.size());
  ASSERT_TRUE(p.run(work(tp::Op::Read, back.data(), p.at1(65536), back.size())).ok);
  EXPECT_EQ(back, big);
  uint64_t old = 0;
  ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(8192), 8, 1)).ok);
  EXPECT_EQ(old, adds);
  ++adds;

  // The owner back: small rounds (peeked), then a large write it reads while polling, after a peek
  // of its first bytes where the socket was quiet.
  for (int i = 0; i < 5; ++i) small_round();
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 1);
  tp::Work wr = work(tp::Op::Write, big.data(), p.at1(65536), big.size());
  ASSERT_EQ(p.post(wr), tp::PostResult::Ok);
  const tp::Completion sent = both_until(wr.cookie, [] { return true; });
  ASSERT_TRUE(sent.ok) << sent.error;
  tp::Work fl = work(tp::Op::Flush, nullptr, 0, 0);
  ASSERT_EQ(p.post(fl), tp::PostResult::Ok);
  const tp::Completion flushed = both_until(fl.cookie, [] { return true; });
  ASSERT_TRUE(flushed.ok) << flushed.error;
  EXPECT_EQ(std::memcmp(p.mem(1) + 65536, big.data(), big.size()), 0);
  EXPECT_EQ(__atomic_load_n(counter, __ATOMIC_ACQUIRE), adds);
  EXPECT_EQ(p.r[0].t->peer_error(1), "");
  EXPECT_EQ(p.r[1].t->peer_error(0), "");
}

// The owner peeks a small request that asks for no reply, applies it, and reads its bytes for good
// at its next look (tcp_target.cpp, pump/unpeek). A peer that resets the connection in between (an
// abortive close: RST) must neither have the request applied twice nor leave the peer healthy.
TEST(TcpTransport, APeerResetBetweenAPeekAndItsReadForGoodAppliesNothingTwice) {
  tp::tcp::TcpTransport t(unconnected_config());
  auto window = t.allocate(4096);
  const auto [mine, theirs] = test_sock::connected_pair();
  t.adopt_in_connection_for_fuzzing(1, mine);
  w::ReqHeader h = req(w::Req::AtomicAdd, 8, reinterpret_cast<uint64_t>(window->addr()));  // region 1: the first
  h.operand = 1;
  ASSERT_EQ(::send(theirs, &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
  const auto* word = static_cast<const uint64_t*>(window->addr());
  std::vector<tp::Completion> done;
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0 && std::chrono::steady_clock::now() < until) t.poll(done);
  ASSERT_EQ(*word, 1u) << "the add was applied";
  ASSERT_EQ(t.peeks(), 1u) << "the owner peeked it (its bytes are still queued)";
  const linger abortive{1, 0};
  ASSERT_EQ(::setsockopt(theirs, SOL_SOCKET, SO_LINGER, &abortive, sizeof abortive), 0);
  ::close(theirs);  // RST
  while (t.peer_error(1).empty() && std::chrono::steady_clock::now() < until) t.poll(done);
  const std::string e = t.peer_error(1);
  EXPECT_TRUE(e.find("reset") != std::string::npos || e.find("closed") != std::string::npos) << e;
  EXPECT_EQ(*word, 1u) << "the peeked add was applied once";
  EXPECT_TRUE(done.empty());
  t.quiesce(false);
}

// A peer's connection that has carried nothing yet (an agent's peer dials back and may never send)
// is left to the owner's epoll rounds (every kEpollEvery = 16th poll, tcp_receiver.cpp serve_direct):
// counted among the sockets the owner recv()s directly, it made a client with two such peers poll
// through epoll_wait every round. Once it has carried bytes, every poll reads it.
TEST(TcpTransport, AConnectionThatHasCarriedNothingIsLeftToEpollRoundsUntilItDoes) {
  tp::tcp::TcpTransport t(unconnected_config());
  auto window = t.allocate(4096);
  const auto [mine, theirs] = test_sock::connected_pair();
  t.adopt_in_connection_for_fuzzing(1, mine);
  const auto* word = static_cast<const uint64_t*>(window->addr());
  const auto queued_at_mine = [fd = mine] {  // bounded: 20 s for loopback to queue what was sent
    int n = 0;
    const auto until = std::chrono::steady_clock::now() + 20s;
    while ((::ioctl(fd, FIONREAD, &n) != 0 || n == 0) && std::chrono::steady_clock::now() < until) {
    }
    return n > 0;
  };
  std::vector<tp::Completion> done;
  for (int i = 0; i < 64; ++i) t.poll(done);
  EXPECT_EQ(t.receive_calls(), 0u) << "64 polls read a connection that never carried anything";
  w::ReqHeader h = req(w::Req::AtomicAdd, 8, reinterpret_cast<uint64_t>(window->addr()));
  h.operand = 1;
  ASSERT_EQ(::send(theirs, &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
  ASSERT_TRUE(queued_at_mine());
  int polls = 0;
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0 && polls < 1000) {
    t.poll(done);
    ++polls;
  }
  EXPECT_EQ(*word, 1u);
  EXPECT_LE(polls, 16) << "the first add waited longer than an epoll round";
  h.operand = 2;
  ASSERT_EQ(::send(theirs, &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
  ASSERT_TRUE(queued_at_mine());
  t.poll(done);
  EXPECT_EQ(__atomic_load_n(word, __ATOMIC_ACQUIRE), 3u) << "a connection that has carried bytes is read at every poll";
  EXPECT_EQ(t.peer_error(1), "");
  ::close(theirs);
  t.quiesce(false);
}

// A region freed while a put(Add) frame's payload is on its way takes nothing: the adder is never run
// (the region and its lock words are gone), no refusal comes back (as for a write into a freed region),
// and the connection stays in step: the frame after it lands. Driven by hand over an adopted
// connection, so the free falls between the two halves of the payload every time.
TEST(TcpTransport, ARegionFreedWhileAPutAddIsArrivingTakesNothingAndTheConnectionStaysInStep) {
  tp::tcp::TcpTransport t(unconnected_config());
  auto victim = t.allocate(4096);  // region 1
  auto other = t.allocate(4096);   // region 2
  auto calls = std::make_shared<int>(0);
  struct CountingAdder final : tp::RegionAdder {
    std::shared_ptr<int> n;
    std::string add(uint64_t, uint64_t, const char*, uint64_t) const noexcept override {
      ++*n;
      return {};
    }
  };
  auto adder = std::make_shared<CountingAdder>();
  adder->n = calls;
  t.accept_adds(*victim, adder);
  const auto [mine, theirs] = test_sock::connected_pair();
  t.adopt_in_connection_for_fuzzing(1, mine);
  std::vector<tp::Completion> done;
  const auto drain = [&] {  // polls until the transport has read everything sent so far
    for (int i = 0; i < 200; ++i) t.poll(done);
  };
  w::ReqHeader h = req(w::Req::WriteAdd, 2048, reinterpret_cast<uint64_t>(victim->addr()));  // region 1
  h.operand = 3;
  const std::vector<char> payload(2048, 1);
  ASSERT_EQ(::send(theirs, &h, sizeof h, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof h));
  ASSERT_EQ(::send(theirs, payload.data(), 1024, MSG_NOSIGNAL), 1024);
  drain();
  victim.reset();  // freed with half the payload received
  ASSERT_EQ(::send(theirs, payload.data() + 1024, 1024, MSG_NOSIGNAL), 1024);
  w::ReqHeader a = req(w::Req::AtomicAdd, 8, reinterpret_cast<uint64_t>(other->addr()));
  a.region = 2;
  a.operand = 7;
  ASSERT_EQ(::send(theirs, &a, sizeof a, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof a));
  const auto* word = static_cast<const uint64_t*>(other->addr());
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0 && std::chrono::steady_clock::now() < until) t.poll(done);
  EXPECT_EQ(*word, 7u) << "the frame after the put(Add) landed: the connection stayed in step";
  EXPECT_EQ(*calls, 0) << "the freed region's adder never ran";
  EXPECT_EQ(t.peer_error(1), "");
  char reply[64];
  EXPECT_EQ(::recv(theirs, reply, sizeof reply, MSG_DONTWAIT), -1) << "no refusal came back";
  ::close(theirs);
  t.quiesce(false);
}

TEST(TcpTransport, AnIdleRanksReceiverThreadSleepsWithoutWakingUp) {
  Pair p;
  uint64_t old = 0;
  ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);
  auto wakes = [&](int r) { return dynamic_cast<tp::tcp::TcpTransport&>(*p.r[r].t).receiver_wakes(); };
  // Past the owner's 200 us window both receiver threads block in epoll_wait with no timeout.
  std::this_thread::sleep_for(50ms);
  const uint64_t before0 = wakes(0), before1 = wakes(1);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(wakes(0), before0) << "rank 0's receiver thread woke while nothing happened";
  EXPECT_EQ(wakes(1), before1) << "rank 1's receiver thread woke while nothing happened";
  // And it still serves at once when something comes (rank 1's owner is away).
  ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);
  EXPECT_EQ(old, 1u);
  EXPECT_GT(wakes(1), before1);
}

// A passive target (rank 1's owner never polls) is served by its receiver thread, which after
// serving keeps polling for RWIN_TCP_RECEIVER_SPIN_US instead of sleeping in epoll_wait: requests
// that follow each other closely cost it no wake-up. When the window ends it sleeps again.
TEST(TcpTransport, APassiveTargetsReceiverThreadPollsBetweenCloseRequestsThenSleeps) {
  rwin::test::EnvGuard env;
  env.set("RWIN_TCP_RECEIVER_SPIN_US", "100000");  // 100 ms: far longer than a round trip, sanitizers included
  Pair p;
  const auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
  uint64_t old = 0;
  ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);  // rank 1's thread wakes, then spins
  const uint64_t wakes_before = t1.receiver_wakes();
  // A wake-up is allowed only where the requests were apart long enough for the window to end: the
  // gap between serving one request and the next one's arrival is below the two round trips' sum.
  int long_gaps = 0;
  double last_ms = 0;
  for (uint64_t i = 1; i <= 50; ++i) {
    const auto t = std::chrono::steady_clock::now();
    ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);
    ASSERT_EQ(old, i);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    if (last_ms + ms > 90) ++long_gaps;
    last_ms = ms;
  }
  EXPECT_LE(t1.receiver_wakes() - wakes_before, static_cast<uint64_t>(long_gaps))
      << "rank 1's receiver thread slept between requests that came within its spin window";
  EXPECT_GT(t1.receiver_spins(), 0u);
  std::this_thread::sleep_for(300ms);  // the window (100 ms after the last request) has ended
  const uint64_t spins = t1.receiver_spins(), wakes = t1.receiver_wakes();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(t1.receiver_spins(), spins) << "rank 1's receiver thread still polls with nothing to serve";
  EXPECT_EQ(t1.receiver_wakes(), wakes);
}

TEST(TcpTransport, AReceiverSpinOfZeroSleepsAfterEveryRequest) {
  rwin::test::EnvGuard env;
  env.set("RWIN_TCP_RECEIVER_SPIN_US", "0");
  Pair p;
  const auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
  uint64_t old = 0;
  const uint64_t wakes_before = t1.receiver_wakes();
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);
  EXPECT_GE(t1.receiver_wakes() - wakes_before, 20u) << "each request woke rank 1's sleeping thread";
  EXPECT_EQ(t1.receiver_spins(), 0u);
}

// More ranks than CPUs on the host: a spinning receiver thread would take the CPU of a rank that shares
// it, so it sleeps after every request whatever RWIN_TCP_RECEIVER_SPIN_US says.
TEST(TcpTransport, AnOversubscribedHostsReceiverThreadDoesNotSpin) {
  rwin::test::EnvGuard env;
  env.set("RWIN_TCP_RECEIVER_SPIN_US", "100000");
  Pair p;
  auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
  std::this_thread::sleep_for(300ms);  // the spin after serving the start-up's handshakes has ended
  t1.set_oversubscribed(true);
  uint64_t old = 0;
  const uint64_t wakes_before = t1.receiver_wakes(), spins_before = t1.receiver_spins();
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(p.run(work(tp::Op::FetchAdd, &old, p.at1(0), 8, 1)).ok);
  EXPECT_EQ(old, 19u);
  EXPECT_EQ(t1.receiver_spins(), spins_before);
  EXPECT_GE(t1.receiver_wakes() - wakes_before, 20u) << "each request woke rank 1's sleeping thread";
}

TEST(TcpTransport, AReceiverSpinOutsideItsRangeIsRefusedNamingTheVariable) {
  for (const char* bad : {"-1", "100001", "50us", "x"}) {
    const std::string err = start_up_error("RWIN_TCP_RECEIVER_SPIN_US", bad);
    EXPECT_NE(err.find("RWIN_TCP_RECEIVER_SPIN_US is '" + std::string(bad) + "'"), std::string::npos)
        << "RWIN_TCP_RECEIVER_SPIN_US=" << bad << ": " << (err.empty() ? "accepted" : err);
  }
}

// ---- striping (RWIN_TCP_SOCKETS) -----------------------------------------------------------------

// Three connections per pair of ranks, and every Write of 4 KiB or more striped over them.
struct StripedEnv {
  rwin::test::EnvGuard env;
  StripedEnv() {
    env.set("RWIN_TCP_SOCKETS", "3");
    env.set("RWIN_TCP_STRIPE_MIN", "4K");
  }
};

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 131 + static_cast<size_t>(seed) * 7 + 1);
  return v;
}

// Writes go round-robin over the three connections, all posted before any completes; a get and a
// Flush after them (no wait in between) see every byte, because the first connection waits at the
// target's end for the lanes' writes the Fence names.
TEST(TcpStriping, WritesOverThreeConnectionsLandWholeAndAGetOrFlushAfterThemSeesEveryStripe) {
  StripedEnv striped;
  Pair p;
  auto& t0 = static_cast<tp::tcp::TcpTransport&>(*p.r[0].t);
  ASSERT_EQ(t0.sockets(), 3);
  for (int round = 0; round < 4; ++round) {
    std::vector<std::vector<char>> srcs;
    std::vector<uint64_t> cookies;
    size_t off = 0;
    for (int i = 0; i < 24; ++i) {
      const size_t n = 4096 + static_cast<size_t>((i * 7919 + round * 131) % 30000);  // every one striped
      srcs.push_back(pattern(n, round * 100 + i));
      tp::Work w = work(tp::Op::Write, srcs.back().data(), p.at1(off), n);
      ASSERT_EQ(p.post(w), tp::PostResult::Ok);
      cookies.push_back(w.cookie);
      off += n + 64;
    }
    // Straight after the writes (none waited for): a get of the last bytes, then a Flush.
    std::vector<char> back(srcs.back().size());
    tp::Work g = work(tp::Op::Read, back.data(), p.at1(off - 64 - back.size()), back.size());
    ASSERT_EQ(p.post(g), tp::PostResult::Ok);
    cookies.push_back(g.cookie);
    ASSERT_TRUE(p.wait_all(cookies)) << p.r[0].t->peer_error(1);
    EXPECT_EQ(back, srcs.back()) << "the get saw the last write (round " << round << ")";
    ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);
    off = 0;
    for (const auto& src : srcs) {
      ASSERT_EQ(std::memcmp(p.mem(1) + off, src.data(), src.size()), 0) << "round " << round << ", offset " << off;
      for (size_t gap = 0; gap < 64; ++gap) ASSERT_EQ(p.mem(1)[off + src.size() + gap], 0) << "nothing between writes";
      off += src.size() + 64;
    }
    std::memset(p.mem(1), 0, off);  // everything landed (the Flush): the next round starts clean
  }
  EXPECT_GE(t0.lane_writes(), 4u * 24 * 2 / 3 - 1) << "two of every three writes went on the lanes";
  EXPECT_GE(t0.fences_sent(), 4u);
  // A write below RWIN_TCP_STRIPE_MIN stays on the first connection.
  const uint64_t lanes_before = t0.lane_writes();
  std::vector<char> small = pattern(4095, 9);
  ASSERT_TRUE(p.run(work(tp::Op::Write, small.data(), p.at1(0), small.size())).ok);
  EXPECT_EQ(t0.lane_writes(), lanes_before);
}

// The ordering made certain, driven by hand over adopted connections: lane 1 carries a write's header
// and half its payload, then the first connection a Fence naming that write and an atomic after it.
// Rank 0 (the target, serving from its polls) must not apply the atomic while the write is half
// there, however long it polls; once the rest arrives, the write lands and then the atomic.
TEST(TcpStriping, AnAtomicBehindAFenceWaitsUntilTheLanesWriteLandedWhole) {
  tp::tcp::TcpTransport t(unconnected_config());
  auto window = t.allocate(1 << 20);
  const uint64_t base = reinterpret_cast<uint64_t>(window->addr());
  const auto [mine, theirs] = test_sock::connected_pair();
  const auto [lane_mine, lane_theirs] = test_sock::connected_pair();
  t.adopt_in_connection_for_fuzzing(1, mine);
  t.adopt_lane_for_testing(1, 1, lane_mine);
  const std::vector<char> data = pattern(256 * 1024, 4);
  w::ReqHeader wr = req(w::Req::Write, data.size(), base + 4096);
  ASSERT_EQ(::send(lane_theirs, &wr, sizeof wr, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof wr));
  const size_t half = data.size() / 2;
  ASSERT_EQ(::send(lane_theirs, data.data(), half, MSG_NOSIGNAL), static_cast<ssize_t>(half));
  w::ReqHeader frames[2]{};
  frames[0].type = static_cast<uint8_t>(w::Req::Fence);
  frames[0].addr = 1;  // one write on lane 1
  frames[1] = req(w::Req::AtomicAdd, 8, base);
  frames[1].operand = 1;
  ASSERT_EQ(::send(theirs, frames, sizeof frames, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof frames));
  const auto* flag = static_cast<const uint64_t*>(window->addr());
  std::vector<tp::Completion> done;
  // Polls until the first half has landed, then 2000 more: room for a wrong order to show.
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::memcmp(static_cast<char*>(window->addr()) + 4096 + half - 64, data.data() + half - 64, 64) != 0 &&
         std::chrono::steady_clock::now() < until) {
    t.poll(done);
  }
  for (int i = 0; i < 2000; ++i) t.poll(done);
  EXPECT_EQ(__atomic_load_n(flag, __ATOMIC_ACQUIRE), 0u) << "the atomic overtook the write on lane 1";
  EXPECT_EQ(t.peer_error(1), "");
  ASSERT_EQ(::send(lane_theirs, data.data() + half, data.size() - half, MSG_NOSIGNAL), static_cast<ssize_t>(data.size() - half));
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0 && std::chrono::steady_clock::now() < until) t.poll(done);
  ASSERT_EQ(__atomic_load_n(flag, __ATOMIC_ACQUIRE), 1u) << t.peer_error(1);
  EXPECT_EQ(std::memcmp(static_cast<char*>(window->addr()) + 4096, data.data(), data.size()), 0);
  // The lane closed between frames is no failure (a goodbye); one closed inside a frame is.
  ::close(lane_theirs);
  for (int i = 0; i < 100; ++i) t.poll(done);
  EXPECT_EQ(t.peer_error(1), "");
  ::close(theirs);
  t.quiesce(false);
}

// A lane closed in the middle of a write's payload (the peer died) fails the peer, named.
TEST(TcpStriping, ALaneClosedInTheMiddleOfAWriteFailsThePeerNamingTheLane) {
  tp::tcp::TcpTransport t(unconnected_config());
  auto window = t.allocate(1 << 20);
  const auto [mine, theirs] = test_sock::connected_pair();
  const auto [lane_mine, lane_theirs] = test_sock::connected_pair();
  t.adopt_in_connection_for_fuzzing(1, mine);
  t.adopt_lane_for_testing(1, 2, lane_mine);
  const std::vector<char> data = pattern(8192, 6);
  w::ReqHeader wr = req(w::Req::Write, 65536, reinterpret_cast<uint64_t>(window->addr()));
  ASSERT_EQ(::send(lane_theirs, &wr, sizeof wr, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof wr));
  ASSERT_EQ(::send(lane_theirs, data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(data.size()));
  ::close(lane_theirs);
  std::vector<tp::Completion> done;
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (t.peer_error(1).empty() && std::chrono::steady_clock::now() < until) t.poll(done);
  EXPECT_NE(t.peer_error(1).find("lane 2 was closed in the middle of a write's payload"), std::string::npos) << t.peer_error(1);
  ::close(theirs);
  t.quiesce(false);
}

// A lane's write outside the target's region is refused by the target on the first connection (a
// lane carries nothing back), naming the lane; nothing lands.
TEST(TcpStriping, ALaneWriteOutsideTheTargetsRegionIsRefusedAndNamed) {
  StripedEnv striped;
  Pair p;
  std::vector<char> src = pattern(8192, 5);
  tp::Work w = work(tp::Op::Write, src.data(), p.at1(Pair::kBytes - 100), src.size());
  ASSERT_EQ(p.post(w), tp::PostResult::Ok);
  ASSERT_EQ(static_cast<tp::tcp::TcpTransport&>(*p.r[0].t).lane_writes(), 1u);
  (void)p.wait(w.cookie);
  const auto c = p.run(work(tp::Op::Flush, nullptr, 0, 0));
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.error.find("rank 1 refused it"), std::string::npos) << c.error;
  EXPECT_NE(c.error.find("on lane 1"), std::string::npos) << c.error;
  for (size_t i = 0; i < Pair::kBytes; i += 4096) ASSERT_EQ(p.mem(1)[i], 0) << "nothing landed at " << i;
  EXPECT_EQ(p.mem(1)[Pair::kBytes - 1], 0);
}

// A Fence naming writes on lanes that do not exist (a peer's garbage) fails the peer, named; it does
// not stall its connection forever.
TEST(TcpStriping, AFenceNamingALaneThatIsNotConnectedFailsThePeer) {
  tp::tcp::TcpTransport t(unconnected_config());
  auto window = t.allocate(4096);
  const auto [mine, theirs] = test_sock::connected_pair();
  t.adopt_in_connection_for_fuzzing(1, mine);
  w::ReqHeader f{};
  f.type = static_cast<uint8_t>(w::Req::Fence);
  f.operand = 2;  // two writes on lane 2
  ASSERT_EQ(w::check_request(f), "");
  ASSERT_EQ(::send(theirs, &f, sizeof f, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof f));
  std::vector<tp::Completion> done;
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (t.peer_error(1).empty() && std::chrono::steady_clock::now() < until) t.poll(done);
  EXPECT_NE(t.peer_error(1).find("a fence waits for 2 writes on lane 2, which is not connected"), std::string::npos)
      << t.peer_error(1);
  ::close(theirs);
  t.quiesce(false);
}

TEST(TcpStriping, HellosOpeningLanesAreCheckedAndRunTimePeersHaveNone) {
  w::Hello h;
  h.src = 1;
  h.dst = 0;
  h.kind = w::lane_kind(1);
  EXPECT_EQ(w::check_hello(h, 0, 2), "");
  EXPECT_EQ(w::hello_lane(h.kind), 1);
  h.kind = w::lane_kind(w::kMaxSockets);
  EXPECT_NE(w::check_hello(h, 0, 2).find("lane 4 (at most 3"), std::string::npos) << w::check_hello(h, 0, 2);
  h.kind = w::lane_kind(0);  // a lane of index 0 is no kind at all
  EXPECT_NE(w::check_hello(h, 0, 2).find("hello kind"), std::string::npos);
  h.kind = w::lane_kind(1);
  h.dst = 0;
  EXPECT_NE(w::check_hello(h, 0, 2, true).find("hello kind"), std::string::npos) << "an agent takes no lanes";
}

TEST(TcpStriping, SocketsAndStripeMinOutsideTheirRangeAreRefusedNamingTheVariable) {
  rwin::test::EnvGuard env;
  const std::pair<const char*, const char*> bad[] = {
      {"RWIN_TCP_SOCKETS", "0"}, {"RWIN_TCP_SOCKETS", "5"}, {"RWIN_TCP_SOCKETS", "x"},
      {"RWIN_TCP_STRIPE_MIN", "0"}, {"RWIN_TCP_STRIPE_MIN", "2G"}, {"RWIN_TCP_STRIPE_MIN", "64X"}};
  for (const auto& [name, value] : bad) {
    const std::string err = start_up_error(name, value);
    EXPECT_NE(err.find(std::string(name) + " is '" + value + "'"), std::string::npos)
        << name << "=" << value << ": " << (err.empty() ? "accepted" : err);
  }
}

// Every rank must open as many connections to each other: a mismatch fails both ranks' connect,
// naming the two values, instead of a rank waiting for lanes that never come.
// Two ranks connect, rank 1 with `knob` set to `value` and rank 0 without it; what each connect() threw.
std::array<std::string, 2> connect_with_rank1_knob(const char* knob, const char* value) {
  const uint16_t port = test_sock::free_port();
  const auto root = rwin::bootstrap::HostPort::parse("127.0.0.1:" + std::to_string(port));
  std::unique_ptr<tp::Transport> t[2];
  {
    rwin::test::EnvGuard env;
    env.set(knob, value);
    tp::TransportConfig cfg = unconnected_config();
    cfg.rank = 1;
    t[1] = tp::make_transport(cfg);
  }
  t[0] = tp::make_transport(unconnected_config());
  std::array<std::string, 2> errs;
  auto start = [&](int me) {
    try {
      rwin::bootstrap::Bootstrap bs(me, 2, root, 20000ms);
      t[me]->connect(bs);
    } catch (const std::exception& e) {
      errs[static_cast<size_t>(me)] = e.what();
    }
  };
  std::thread one(start, 1);
  start(0);
  one.join();
  for (auto& x : t) x->quiesce(false);
  return errs;
}

TEST(TcpStriping, RanksWithDifferentSocketCountsFailToConnectNamingBoth) {
  const auto errs = connect_with_rank1_knob("RWIN_TCP_SOCKETS", "2");  // rank 0: unset, 1
  EXPECT_NE(errs[0].find("rank 0 has RWIN_TCP_SOCKETS=1 but rank 1 has 2"), std::string::npos) << errs[0];
  EXPECT_NE(errs[1].find("rank 1 has RWIN_TCP_SOCKETS=2 but rank 0 has 1"), std::string::npos) << errs[1];
}

// ---- duplex connections (RWIN_TCP_DUPLEX) -------------------------------------------------------

// One socket per pair of ranks (the lower one dials), carrying both ranks' requests and the replies
// to them: both ranks write into, read from and fetch-add on each other at once, every byte checked.
TEST(TcpDuplex, OneConnectionCarriesBothRanksRequestsAndRepliesInterleaved) {
  Pair p;
  auto& t0 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[0].t);
  auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
  EXPECT_EQ(t0.connections_to(1), 1);
  EXPECT_EQ(t1.connections_to(0), 1);
  for (int i = 0; i < 64; ++i) {
    std::memset(p.mem(0) + 100000 + i * 1000, 'a' + i % 26, 1000);
    std::memset(p.mem(1) + 200000 + i * 1000, 'A' + i % 26, 1000);
  }
  std::string err1;
  std::vector<char> got1(64 * 1000);
  uint64_t olds1[64] = {};
  std::thread rank1([&] {  // rank 1 reads rank 0's pattern and adds to rank 0's counter, 64 times
    tp::Transport& t = *p.r[1].t;
    std::vector<uint64_t> ids;
    for (int i = 0; i < 64; ++i) {
      tp::Work rd = work(tp::Op::Read, got1.data() + i * 1000, p.key_of_0->base() + 100000 + i * 1000, 1000);
      tp::Work fa = work(tp::Op::FetchAdd, &olds1[i], p.key_of_0->base() + 8, 8, 1);
      for (tp::Work* w : {&rd, &fa}) {
        w->peer = 0;
        w->rkey = p.key_of_0.get();
        w->cookie = 1000 + ids.size();
        ids.push_back(w->cookie);
        if (t.post(*w) != tp::PostResult::Ok) {
          err1 = "post: " + t.peer_error(0);
          return;
        }
      }
    }
    std::vector<tp::Completion> done;
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (!ids.empty() && std::chrono::steady_clock::now() < until) {
      t.poll(done);
      for (auto& c : done) {
        if (!c.ok) err1 = c.error;
        std::erase(ids, c.cookie);
      }
      done.clear();
    }
    if (!ids.empty()) err1 = std::to_string(ids.size()) + " of rank 1's operations did not complete within 20 s";
  });
  // Meanwhile rank 0 writes into rank 1 and reads rank 1's pattern back, and adds to its counter.
  std::vector<char> got0(64 * 1000);
  std::vector<char> src(64 * 1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 31 + 7);
  std::vector<uint64_t> ids;
  uint64_t olds0[64] = {};
  for (int i = 0; i < 64; ++i) {
    tp::Work wr = work(tp::Op::Write, src.data() + i * 1000, p.at1(400000 + i * 1000), 1000);
    tp::Work rd = work(tp::Op::Read, got0.data() + i * 1000, p.at1(200000 + i * 1000), 1000);
    tp::Work fa = work(tp::Op::FetchAdd, &olds0[i], p.at1(16), 8, 1);
    for (tp::Work* w : {&wr, &rd, &fa}) {
      ASSERT_EQ(p.post(*w), tp::PostResult::Ok);
      ids.push_back(w->cookie);
    }
  }
  tp::Work fl = work(tp::Op::Flush, nullptr, 0, 0);
  ASSERT_EQ(p.post(fl), tp::PostResult::Ok);
  ids.push_back(fl.cookie);
  EXPECT_TRUE(p.wait_all(ids));
  rank1.join();
  ASSERT_TRUE(err1.empty()) << err1;
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(olds0[i], static_cast<uint64_t>(i)) << "rank 0's fetch-adds in order";
    EXPECT_EQ(olds1[i], static_cast<uint64_t>(i)) << "rank 1's fetch-adds in order";
    EXPECT_EQ(got0[i * 1000], 'A' + i % 26);
    EXPECT_EQ(got1[i * 1000 + 999], 'a' + i % 26);
  }
  EXPECT_EQ(std::memcmp(p.mem(1) + 400000, src.data(), src.size()), 0);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(std::memcmp(got0.data() + i * 1000, p.mem(1) + 200000 + i * 1000, 1000), 0) << i;
  for (int i = 0; i < 64; ++i) EXPECT_EQ(std::memcmp(got1.data() + i * 1000, p.mem(0) + 100000 + i * 1000, 1000), 0) << i;
}

// A request the caller left half sent (its socket was full) is finished by the receive side when a
// reply has to follow it, so a peer's get is answered while the caller is away from rwin.
TEST(TcpDuplex, ARequestLeftHalfSentIsFinishedSoThePeersGetIsAnsweredWhileTheCallerIsAway) {
  constexpr size_t kBig = 48u << 20;  // far more than loopback's socket buffers hold
  Pair p(kBig + (1u << 20));
  std::vector<char> big(kBig);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 11 + i / 4093);
  std::memcpy(p.mem(0) + 64, "rank 0!", 8);
  char got[8] = {};
  tp::Work rd = work(tp::Op::Read, got, p.key_of_0->base() + 64, 8);
  rd.peer = 0;
  rd.rkey = p.key_of_0.get();
  rd.cookie = 9;
  tp::Work wr = work(tp::Op::Write, big.data(), p.at1(4096), big.size());
  {
    // Rank 1 reads nothing meanwhile, so rank 0's socket fills and the write is left half sent.
    auto held = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t).hold_receive_side_for_testing();
    ASSERT_EQ(p.post(wr), tp::PostResult::Ok);  // sends what fits; rank 0 polls no more until the get
    ASSERT_EQ(p.r[1].t->post(rd), tp::PostResult::Ok);
  }
  const tp::Completion c = p.wait(rd.cookie, 1);  // rank 1 polls (and lands the write); rank 0 does not
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(std::memcmp(got, "rank 0!", 8), 0);
  EXPECT_EQ(std::memcmp(p.mem(1) + 4096, big.data(), big.size()), 0) << "the write landed whole before the reply";
  const tp::Completion w = p.wait(wr.cookie);  // rank 0 back: its write completes
  EXPECT_TRUE(w.ok) << w.error;
}

// Every rank must connect the same way: a mismatch fails both ranks' connect, naming both values.
TEST(TcpDuplex, RanksWithDifferentDuplexSettingsFailToConnectNamingBoth) {
  const auto errs = connect_with_rank1_knob("RWIN_TCP_DUPLEX", "0");  // rank 0: unset, 1
  EXPECT_NE(errs[0].find("rank 0 has RWIN_TCP_DUPLEX=1 but rank 1 has 0"), std::string::npos) << errs[0];
  EXPECT_NE(errs[1].find("rank 1 has RWIN_TCP_DUPLEX=0 but rank 0 has 1"), std::string::npos) << errs[1];
  rwin::test::EnvGuard env;
  env.set("RWIN_TCP_DUPLEX", "2");
  EXPECT_THROW(tp::make_transport(unconnected_config()), tp::TransportError);
}

// Striped pairs, and RWIN_TCP_DUPLEX=0, keep one connection per direction.
TEST(TcpDuplex, StripedOrDisabledPairsKeepAConnectionPerDirection) {
  {
    rwin::test::EnvGuard env;
    env.set("RWIN_TCP_DUPLEX", "0");
    Pair p;
    EXPECT_EQ(dynamic_cast<tp::tcp::TcpTransport&>(*p.r[0].t).connections_to(1), 2);
    ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);
  }
  StripedEnv env;
  Pair p;
  EXPECT_EQ(dynamic_cast<tp::tcp::TcpTransport&>(*p.r[0].t).connections_to(1), 2 + 2 * 2);
  ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);
}

// ---- parking (RWIN_TCP_PARK) --------------------------------------------------------------------

// Rank 1's owner polls from a thread of its own until stopped (inside rwin: it serves its arrivals).
struct Polling {
  tp::Transport& t;
  std::atomic<bool> on{true};
  std::thread th;
  explicit Polling(tp::Transport& tr) : t(tr), th([this] {
    std::vector<tp::Completion> done;
    while (on.load()) {
      t.poll(done);
      done.clear();
    }
  }) {}
  void stop() {
    on = false;
    if (th.joinable()) th.join();
  }
  ~Polling() { stop(); }
};

// Calls `f` every millisecond until it returns true (true) or 10 s pass (false). What it saw once
// is the answer: `f` is not asked again (a parked socket may be put back a moment later, when the
// polling thread is descheduled for longer than the owner's window).
template <class F>
bool became_true(F f) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    if (f()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(1ms);
  }
}

// While a rank's owner polls, its receiver thread takes the duplex socket out of the epoll set, and
// what the peer sends is still served (by the owner's polls, or by whichever side holds the receive
// side when the owner is descheduled); once the owner stays away, the thread puts it back and serves
// a get of the passive rank itself.
TEST(TcpPark, AnOwnersSocketLeavesTheEpollSetWhileItPollsAndComesBackWhenItLeaves) {
  Pair p;
  auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
  Polling owner(t1);
  // The thread sleeps in epoll_wait until something arrives; then, finding the owner polling, it naps
  // and parks.
  ASSERT_TRUE(became_true([&] { return p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok && t1.parked_for_testing() == 1; }))
      << "never parked while its owner polled";
  std::vector<char> src(3000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  std::vector<uint64_t> ids;
  std::vector<tp::Work> ws;
  for (int i = 0; i < 3; ++i) ws.push_back(work(tp::Op::Write, src.data() + i * 1000, p.at1(1000 + i * 1000), 1000));
  ws.push_back(work(tp::Op::AtomicAdd, nullptr, p.at1(8), 8, 5));
  char back[1000] = {};
  ws.push_back(work(tp::Op::Read, back, p.at1(2000), 1000));
  ws.push_back(work(tp::Op::Flush, nullptr, 0, 0));
  for (auto& w : ws) {
    ASSERT_EQ(p.post(w), tp::PostResult::Ok);
    ids.push_back(w.cookie);
  }
  ASSERT_TRUE(p.wait_all(ids));
  EXPECT_EQ(std::memcmp(p.mem(1) + 1000, src.data(), src.size()), 0);
  EXPECT_EQ(std::memcmp(back, src.data() + 1000, 1000), 0);
  uint64_t added = 0;
  std::memcpy(&added, p.mem(1) + 8, 8);
  EXPECT_EQ(added, 5u);
  owner.stop();  // rank 1 leaves rwin: only its receiver thread can serve now
  std::memcpy(p.mem(1) + 500, "passive", 8);
  char got[8] = {};
  const tp::Completion c = p.run(work(tp::Op::Read, got, p.at1(500), 8));
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_EQ(std::memcmp(got, "passive", 8), 0);
  EXPECT_EQ(t1.parked_for_testing(), 0) << "the thread serves only after it put the socket back";
}

// RWIN_TCP_PARK=0 keeps every socket in the epoll set; RWIN_TCP_PARK takes 0 or 1 only.
TEST(TcpPark, DisabledNothingIsParked) {
  {
    rwin::test::EnvGuard env;
    env.set("RWIN_TCP_PARK", "0");
    Pair p;
    auto& t1 = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[1].t);
    Polling owner(t1);
    // 100 round trips while rank 1's owner polls: each wakes its thread, which then naps and would park.
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);
      ASSERT_EQ(t1.parked_for_testing(), 0);
    }
  }
  rwin::test::EnvGuard env;
  env.set("RWIN_TCP_PARK", "yes");
  EXPECT_THROW(tp::make_transport(unconnected_config()), tp::TransportError);
}

}  // namespace

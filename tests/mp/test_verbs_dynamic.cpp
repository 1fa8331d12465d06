// The verbs transport with run-time peers (TransportConfig::dynamic_peers, transport.h "Peers met
// at run time"): several VerbsTransport objects in this one process meet by the add_peer /
// local_endpoint / connect_peer handshake, the blobs carried in memory as an agent would carry
// them over its control connection, and move data into caller memory exposed with expose_memory().
// Needs an RDMA device: run inside the soft-RoCE guest, e.g.
//   tests/rxe/run-in-guest.sh build/bin/rwin_mp_tests --gtest_filter='VerbsDynamic*'
// Elsewhere every test skips with one line saying so.
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/transport.h"
#include "transport/verbs/verbs_blob.h"
#include "transport/verbs/verbs_transport.h"
#include "verbs_test_util.h"

namespace {

using namespace std::chrono_literals;
using rwin::transport::Completion;
using rwin::transport::PostResult;
using rwin::transport::Transport;
using rwin::transport::TransportConfig;
using rwin::transport::TransportError;
// MemoryRegion, Op, RemoteKey, Work: verbs_test_util.h
using Clock = std::chrono::steady_clock;

// Generous: rxe under qemu TCG is slow; a healthy operation takes milliseconds.
constexpr auto kOpDeadline = 60s;

TransportConfig dynamic_config() {
  TransportConfig cfg;
  cfg.name = "verbs";
  if (const char* dev = std::getenv("RWIN_RXE_DEV")) cfg.ib_device = dev;
  cfg.dynamic_peers = true;
  cfg.rank = 0;
  cfg.nranks = 0;
  return cfg;
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

// One transport and the completions it reported, by cookie.
struct Node {
  std::unique_ptr<Transport> t = rwin::transport::make_transport(dynamic_config());
  std::map<uint64_t, Completion> done;
  uint64_t next_cookie = 1;

  bool pump() {
    std::vector<Completion> got;
    t->poll(got);
    for (auto& c : got) {
      EXPECT_EQ(done.count(c.cookie), 0u) << "cookie " << c.cookie << " completed twice";
      done.emplace(c.cookie, std::move(c));
    }
    return !got.empty();
  }
  // Posts, polling while Busy. Returns the cookie, 0 when the post said PeerFailed.
  uint64_t post(Work w, PostResult* result = nullptr) {
    w.cookie = next_cookie++;
    const auto deadline = Clock::now() + kOpDeadline;
    for (;;) {
      const PostResult r = t->post(w);
      if (result) *result = r;
      if (r == PostResult::Ok) return w.cookie;
      if (r == PostResult::PeerFailed) return 0;
      pump();
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "post to peer " << w.peer << " stayed Busy for 60 s";
        return 0;
      }
    }
  }
  // Polls until `cookie` completed (true) or the deadline passed (a test failure, false).
  bool wait(uint64_t cookie, Completion* out = nullptr) {
    const auto deadline = Clock::now() + kOpDeadline;
    while (!done.count(cookie)) {
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "no completion for cookie " << cookie << " within 60 s";
        return false;
      }
      if (!pump()) std::this_thread::sleep_for(50us);
    }
    if (out) *out = done.at(cookie);
    return true;
  }
  // Posts, waits, and requires success.
  void run(const Work& w) {
    const uint64_t c = post(w);
    ASSERT_NE(c, 0u) << "post to peer " << w.peer << ": PeerFailed: " << t->peer_error(w.peer);
    Completion got;
    ASSERT_TRUE(wait(c, &got));
    EXPECT_TRUE(got.ok) << got.error;
  }
};

// The handshake of transport.h between `a` and `b`: returns {a's index for b, b's index for a}.
std::pair<int, int> handshake(Node& a, Node& b) {
  const int pa = a.t->add_peer();
  const auto blob_a = a.t->local_endpoint(pa);  // A -> B over the caller's channel
  const int pb = b.t->add_peer();
  b.t->connect_peer(pb, blob_a);
  const auto blob_b = b.t->local_endpoint(pb);  // B -> A, the reply
  a.t->connect_peer(pa, blob_b);
  return {pa, pb};  // A then sends "ready": in one process there is nothing left to wait for
}

// Caller memory that is deliberately not page aligned: the exposed range starts 24 bytes into a
// heap block, with guard words on both sides that no peer may touch.
struct Exposed {
  static constexpr size_t kGuardWords = 3;
  std::vector<uint64_t> block;
  std::unique_ptr<MemoryRegion> mr;
  Exposed(Transport& t, size_t words) : block(words + 2 * kGuardWords, 0x6a6a6a6a6a6a6a6aull) {
    for (size_t i = kGuardWords; i < kGuardWords + words; ++i) block[i] = 0;
    mr = t.expose_memory(base(), words * 8);
  }
  uint64_t* base() { return block.data() + kGuardWords; }
  uint64_t addr(size_t byte_offset) { return reinterpret_cast<uint64_t>(base()) + byte_offset; }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuardWords; ++i) {
      if (block[i] != 0x6a6a6a6a6a6a6a6aull || block[block.size() - 1 - i] != 0x6a6a6a6a6a6a6a6aull) return false;
    }
    return true;
  }
};

// Every op of the seam from `a` (peer index pa) into memory its peer exposed; `seed` varies the data.
void every_op(Node& a, int pa, Exposed& target, int seed) {
  const size_t n = 4000;
  std::vector<uint8_t> src(n), back(n, 0);
  for (size_t i = 0; i < n; ++i) src[i] = pattern(seed, i);
  auto src_mr = a.t->register_memory(src.data(), n);
  auto back_mr = a.t->register_memory(back.data(), n);
  std::vector<uint64_t> slot(1, 0);
  auto slot_mr = a.t->register_memory(slot.data(), 8);
  auto key = a.t->unpack_key(pa, target.mr->packed_key());
  ASSERT_EQ(key->base(), target.addr(0));

  // Write at byte 16, then Flush: the data is in b's memory when the Flush completes.
  a.run(write_work(pa, src.data(), src_mr.get(), target.addr(16), key.get(), n));
  a.run(flush_work(pa));
  EXPECT_EQ(std::memcmp(reinterpret_cast<uint8_t*>(target.base()) + 16, src.data(), n), 0);
  // Read it back into a's memory.
  a.run(read_work(pa, back.data(), back_mr.get(), target.addr(16), key.get(), n));
  EXPECT_EQ(back, src);

  // Atomics on word 0 (not written above): 0 +5 = 5; fetch-add 7 -> old 5; swap 99 -> old 12;
  // CAS(99 -> 123) -> old 99; CAS(1 -> 7) fails -> old 123, word stays 123.
  const uint64_t w0 = target.addr(0);
  a.run(atomic_work(Op::AtomicAdd, pa, nullptr, nullptr, w0, key.get(), 5));
  a.run(atomic_work(Op::FetchAdd, pa, slot.data(), slot_mr.get(), w0, key.get(), 7));
  EXPECT_EQ(slot[0], 5u);
  a.run(atomic_work(Op::Swap, pa, slot.data(), slot_mr.get(), w0, key.get(), 99));
  EXPECT_EQ(slot[0], 12u);
  a.run(atomic_work(Op::CompareSwap, pa, slot.data(), slot_mr.get(), w0, key.get(), 123, 99));
  EXPECT_EQ(slot[0], 99u);
  a.run(atomic_work(Op::CompareSwap, pa, slot.data(), slot_mr.get(), w0, key.get(), 7, 1));
  EXPECT_EQ(slot[0], 123u);
  a.run(flush_work(pa));
  EXPECT_EQ(target.base()[0], 123u);
  EXPECT_TRUE(target.guards_intact()) << "a peer wrote outside the exposed range";
}

TEST(VerbsDynamic, HandshakeThenEveryOpBothWays) {
  VERBS_REQUIRE_DEVICE();
  Node a, b;
  const auto [pa, pb] = handshake(a, b);
  EXPECT_EQ(pa, 0);
  EXPECT_EQ(pb, 0);
  Exposed at_a(*a.t, 1024), at_b(*b.t, 1024);
  every_op(a, pa, at_b, 1);
  every_op(b, pb, at_a, 2);
  EXPECT_EQ(a.t->peer_error(pa), "");
  EXPECT_EQ(b.t->peer_error(pb), "");
}

TEST(VerbsDynamic, SelfConnect) {
  VERBS_REQUIRE_DEVICE();
  Node a;
  const int p = a.t->add_peer();
  a.t->connect_peer(p, a.t->local_endpoint(p));
  Exposed mem(*a.t, 1024);
  every_op(a, p, mem, 3);
}

// A third transport joins, and a's peer table and CQ grow (12 more self-connected slots push the
// CQ past its initial size: 4 peers' send queues, which rxe rounds up to 2047 entries), while a's
// writes to b are posted and their completions not yet polled.
TEST(VerbsDynamic, PeersAddedWhileWorkInFlight) {
  VERBS_REQUIRE_DEVICE();
  Node a, b, c;
  const auto [ab, ba] = handshake(a, b);
  Exposed at_b(*b.t, 8192), at_c(*c.t, 1024);
  auto key_b = a.t->unpack_key(ab, at_b.mr->packed_key());
  const size_t chunk = 4096, chunks = 16;
  std::vector<uint8_t> src(chunk * chunks);
  for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(4, i);
  auto src_mr = a.t->register_memory(src.data(), src.size());
  std::vector<uint64_t> in_flight;
  for (size_t k = 0; k < chunks; ++k) {
    in_flight.push_back(
        a.post(write_work(ab, src.data() + k * chunk, src_mr.get(), at_b.addr(k * chunk), key_b.get(), chunk)));
    ASSERT_NE(in_flight.back(), 0u);
  }
  a.pump();  // hands the staged chain to the device
  in_flight.push_back(a.post(flush_work(ab)));

  const auto [ac, ca] = handshake(a, c);
  EXPECT_EQ(ac, 1);
  EXPECT_EQ(ca, 0);
  std::vector<int> selves;
  for (int i = 0; i < 12; ++i) {
    const int p = a.t->add_peer();
    a.t->connect_peer(p, a.t->local_endpoint(p));
    selves.push_back(p);
  }
  EXPECT_EQ(selves.back(), 13);
  auto key_c = a.t->unpack_key(ac, at_c.mr->packed_key());
  a.run(write_work(ac, src.data(), src_mr.get(), at_c.addr(0), key_c.get(), 1024));
  a.run(flush_work(ac));
  EXPECT_EQ(std::memcmp(at_c.base(), src.data(), 1024), 0);
  // Every slot added later works too: a fetch-add on own memory through each.
  Exposed own(*a.t, 8);
  std::vector<uint64_t> slot(1, 0);
  auto slot_mr = a.t->register_memory(slot.data(), 8);
  for (size_t i = 0; i < selves.size(); ++i) {
    auto key = a.t->unpack_key(selves[i], own.mr->packed_key());
    a.run(atomic_work(Op::FetchAdd, selves[i], slot.data(), slot_mr.get(), own.addr(0), key.get(), 1));
    EXPECT_EQ(slot[0], i);
  }
  for (uint64_t cookie : in_flight) {
    Completion got;
    ASSERT_TRUE(a.wait(cookie, &got));
    EXPECT_TRUE(got.ok) << got.error;
  }
  EXPECT_EQ(std::memcmp(at_b.base(), src.data(), src.size()), 0);
  EXPECT_TRUE(at_b.guards_intact() && at_c.guards_intact());
}

// Ten run-time peers, each send queue filled until post() says Busy with nothing polled meanwhile
// (the CQ grows past its initial size on the way): every write completes, successfully. (Success
// costs one CQ entry per signalled chain of 16; the room for a full queue per peer is for the
// flush errors after a failure, which this test does not provoke.)
TEST(VerbsDynamic, EveryPeerFullAtOnce) {
  VERBS_REQUIRE_DEVICE();
  Node a;
  Exposed mem(*a.t, 8);
  std::vector<uint64_t> src(1, 7);
  auto src_mr = a.t->register_memory(src.data(), 8);
  std::vector<uint64_t> cookies;
  std::vector<std::unique_ptr<RemoteKey>> keys;
  for (int i = 0; i < 10; ++i) {
    const int p = a.t->add_peer();
    a.t->connect_peer(p, a.t->local_endpoint(p));
    keys.push_back(a.t->unpack_key(p, mem.mr->packed_key()));
    for (;;) {
      Work w = write_work(p, src.data(), src_mr.get(), mem.addr(8 * (i % 8)), keys.back().get(), 8);
      w.cookie = a.next_cookie++;
      const PostResult r = a.t->post(w);
      if (r == PostResult::Busy) break;
      ASSERT_EQ(r, PostResult::Ok) << a.t->peer_error(p);
      cookies.push_back(w.cookie);
    }
  }
  EXPECT_GE(cookies.size(), 10u * 8);  // at least kMinSqDepth each
  for (uint64_t c : cookies) {
    Completion got;
    ASSERT_TRUE(a.wait(c, &got));
    ASSERT_TRUE(got.ok) << got.error;
  }
  EXPECT_TRUE(mem.guards_intact());
}

// After the exposed region is destroyed, a peer's write or atomic with the stale key fails at that
// peer, with a message naming the peer, the op and the address, and the memory is untouched.
TEST(VerbsDynamic, StaleKeyFailsAtInitiatorAndLeavesMemory) {
  VERBS_REQUIRE_DEVICE();
  Node a, b;
  std::vector<uint64_t> mem(512, 0);
  auto mr = b.t->expose_memory(mem.data(), mem.size() * 8);
  const auto packed = mr->packed_key();
  std::vector<uint8_t> src(256, 0xab);
  auto src_mr = a.t->register_memory(src.data(), src.size());
  std::vector<uint64_t> slot(1, 0);
  auto slot_mr = a.t->register_memory(slot.data(), 8);

  // Before: a write lands. Two connections, one per stale op (a failure ends its connection).
  const auto [p1, q1] = handshake(a, b);
  const auto [p2, q2] = handshake(a, b);
  auto key1 = a.t->unpack_key(p1, packed);
  auto key2 = a.t->unpack_key(p2, packed);
  a.run(write_work(p1, src.data(), src_mr.get(), key1->base(), key1.get(), 8));
  a.run(flush_work(p1));
  ASSERT_EQ(mem[0], 0xababababababababull);
  mem[0] = 17;

  mr.reset();  // deregistered; the memory stays ours
  const std::vector<uint64_t> before = mem;
  const uint64_t target = key1->base() + 64;
  // A write of up to the device's inline size completes at post (its source is reusable): the
  // flush after it carries its failure, naming the write.
  a.post(write_work(p1, src.data(), src_mr.get(), target, key1.get(), 128));
  const uint64_t w = a.post(flush_work(p1));
  Completion got;
  ASSERT_TRUE(a.wait(w, &got));
  EXPECT_FALSE(got.ok);
  EXPECT_NE(got.error.find("peer " + std::to_string(p1)), std::string::npos) << got.error;
  EXPECT_NE(got.error.find("rdma write"), std::string::npos) << got.error;
  EXPECT_NE(got.error.find(hex(target)), std::string::npos) << got.error;
  EXPECT_NE(got.error.find("remote access error"), std::string::npos) << got.error;
  EXPECT_EQ(a.t->peer_error(p1), got.error);
  PostResult r{};
  EXPECT_EQ(a.post(flush_work(p1), &r), 0u);
  EXPECT_EQ(r, PostResult::PeerFailed);

  const uint64_t f = a.post(atomic_work(Op::FetchAdd, p2, slot.data(), slot_mr.get(), key2->base(), key2.get(), 1));
  ASSERT_TRUE(a.wait(f, &got));
  EXPECT_FALSE(got.ok);
  EXPECT_NE(got.error.find("fetch-add"), std::string::npos) << got.error;
  EXPECT_NE(got.error.find(hex(key2->base())), std::string::npos) << got.error;
  EXPECT_EQ(mem, before) << "a stale key reached the memory";
  (void)q1, (void)q2;
}

// Exposed memory need not be page aligned, yet the device keeps peers inside it: a key forged to
// claim 8 more bytes passes the transport's own range check, and the device refuses the write to
// those bytes (they share a page with the exposed range, so only the MR's exact bounds stop it).
TEST(VerbsDynamic, DeviceRefusesBytesPastAnUnalignedExposedRange) {
  VERBS_REQUIRE_DEVICE();
  Node a, b;
  const auto [ab, ba] = handshake(a, b);
  Exposed at_b(*b.t, 5);  // 40 bytes starting 24 bytes into a heap block
  auto k = rwin::transport::verbs::KeyBlob::unpack(at_b.mr->packed_key());
  ASSERT_EQ(k.bytes, 40u);
  k.bytes += 8;
  auto forged = a.t->unpack_key(ab, k.pack());
  std::vector<uint64_t> src(2, 0x1111111111111111ull);
  auto src_mr = a.t->register_memory(src.data(), 16);
  a.run(write_work(ab, src.data(), src_mr.get(), at_b.addr(32), forged.get(), 8));  // the last exposed word
  a.run(flush_work(ab));
  EXPECT_EQ(at_b.base()[4], 0x1111111111111111ull);
  const uint64_t past = at_b.addr(40);
  a.post(write_work(ab, src.data(), src_mr.get(), past, forged.get(), 8));
  const uint64_t c = a.post(flush_work(ab));  // the inline write completed at post; the flush fails
  Completion got;
  ASSERT_TRUE(a.wait(c, &got));
  EXPECT_FALSE(got.ok) << "the device let a peer write past the exposed range";
  EXPECT_NE(got.error.find(hex(past)), std::string::npos) << got.error;
  EXPECT_TRUE(at_b.guards_intact()) << "a peer wrote outside the exposed range";
  (void)ba;
}

// fail_peer on one run-time peer: its work completes failed, later posts say PeerFailed, its QP is
// gone (the peer's own writes into our memory fail at the peer and change nothing), the others
// keep working, and peers added afterwards get new indices and work.
TEST(VerbsDynamic, FailPeerLeavesOthersWorking) {
  VERBS_REQUIRE_DEVICE();
  Node a, b, c;
  const auto [ab, ba] = handshake(a, b);
  const auto [ac, ca] = handshake(a, c);
  Exposed at_b(*b.t, 1024), at_c(*c.t, 1024);
  auto key_b = a.t->unpack_key(ab, at_b.mr->packed_key());
  auto key_c = a.t->unpack_key(ac, at_c.mr->packed_key());
  std::vector<uint8_t> src(4096);
  for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(5, i);
  auto src_mr = a.t->register_memory(src.data(), src.size());
  // b writes into a's memory through the pair that a is about to end: fine before.
  Exposed at_a(*a.t, 8);
  auto key_a = b.t->unpack_key(ba, at_a.mr->packed_key());
  std::vector<uint64_t> from_b(1, 0x2222222222222222ull);
  auto from_b_mr = b.t->register_memory(from_b.data(), 8);
  b.run(write_work(ba, from_b.data(), from_b_mr.get(), at_a.addr(0), key_a.get(), 8));
  b.run(flush_work(ba));
  ASSERT_EQ(at_a.base()[0], 0x2222222222222222ull);

  std::vector<uint64_t> staged;
  for (int k = 0; k < 4; ++k) staged.push_back(a.post(write_work(ab, src.data(), src_mr.get(), at_b.addr(0), key_b.get(), 4096)));
  a.t->fail_peer(ab, "test: peer b went away");
  for (uint64_t cookie : staged) {
    Completion got;
    ASSERT_TRUE(a.wait(cookie, &got));
    EXPECT_FALSE(got.ok);
    EXPECT_NE(got.error.find("test: peer b went away"), std::string::npos) << got.error;
  }
  EXPECT_EQ(a.t->peer_error(ab), "test: peer b went away");
  PostResult r{};
  EXPECT_EQ(a.post(flush_work(ab), &r), 0u);
  EXPECT_EQ(r, PostResult::PeerFailed);
  EXPECT_THROW(a.t->local_endpoint(ab), TransportError);
  // After: nothing answers at a's end, so b's write runs out of retries (~7.5 s, verbs_connect.cpp)
  // and a's memory keeps the old value.
  from_b[0] = 0x3333333333333333ull;
  b.post(write_work(ba, from_b.data(), from_b_mr.get(), at_a.addr(0), key_a.get(), 8));
  const uint64_t late = b.post(flush_work(ba));  // the inline write completed at post; the flush fails
  Completion late_got;
  ASSERT_TRUE(b.wait(late, &late_got));
  EXPECT_FALSE(late_got.ok) << "a write reached a peer whose connection was ended with fail_peer";
  EXPECT_NE(late_got.error.find("retry"), std::string::npos) << late_got.error;
  EXPECT_EQ(at_a.base()[0], 0x2222222222222222ull);

  a.run(write_work(ac, src.data(), src_mr.get(), at_c.addr(0), key_c.get(), 4096));
  a.run(flush_work(ac));
  EXPECT_EQ(std::memcmp(at_c.base(), src.data(), 4096), 0);

  // b meets a again: a new slot on both sides (indices are never reused).
  const auto [ab2, ba2] = handshake(a, b);
  EXPECT_EQ(ab2, 2);
  EXPECT_EQ(ba2, 1);
  auto key_b2 = a.t->unpack_key(ab2, at_b.mr->packed_key());
  a.run(write_work(ab2, src.data(), src_mr.get(), at_b.addr(8), key_b2.get(), 1024));
  a.run(flush_work(ab2));
  EXPECT_EQ(std::memcmp(reinterpret_cast<uint8_t*>(at_b.base()) + 8, src.data(), 1024), 0);
  (void)ca;
}

void expect_rejected(Transport& t, int peer, const std::vector<uint8_t>& blob, const std::string& part) {
  try {
    t.connect_peer(peer, blob);
    ADD_FAILURE() << "accepted, expected a TransportError mentioning '" << part << "'";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("peer " + std::to_string(peer)), std::string::npos) << e.what();
  }
}

// Bad endpoint blobs are refused with a clear TransportError before the QP leaves INIT, so the
// same slot then connects with the right blob.
TEST(VerbsDynamic, GarbageEndpointsAreRejected) {
  VERBS_REQUIRE_DEVICE();
  Node a, b;
  const int pa = a.t->add_peer();
  const int pb = b.t->add_peer();
  const auto good = b.t->local_endpoint(pb);
  ASSERT_EQ(good.size(), rwin::transport::verbs::EndpointBlob::kBytes);
  expect_rejected(*a.t, pa, {1, 2, 3}, "truncated");
  auto bad = good;
  bad[4] = 9;  // version
  expect_rejected(*a.t, pa, bad, "version 9");
  bad = good;
  bad.push_back(0);
  expect_rejected(*a.t, pa, bad, "length mismatch");
  // Field offsets after the 8-byte header: instance u64, slot u32, qpn u32, psn u32, lid u16, mtu, link layer.
  const size_t mtu_at = 8 + 8 + 4 + 4 + 4 + 2;
  bad = good;
  bad[mtu_at + 1] = bad[mtu_at + 1] == 1 ? 2 : 1;  // the other link layer
  expect_rejected(*a.t, pa, bad, "link layer");
  bad = good;
  bad[mtu_at] = 9;
  expect_rejected(*a.t, pa, bad, "MTU code 9");
  bad = good;
  const size_t gid_at = mtu_at + 2;  // after mtu and link layer: 16 bytes
  std::fill(bad.begin() + gid_at, bad.begin() + gid_at + 16, uint8_t{0});
  bad[mtu_at - 2] = 0;  // lid 0 as well, so IB would need the GID too
  bad[mtu_at - 1] = 0;
  expect_rejected(*a.t, pa, bad, "all-zero GID");
  rwin::transport::verbs::ConnBlob collective;
  expect_rejected(*a.t, pa, collective.pack(), "bad magic");
  EXPECT_THROW(a.t->connect_peer(7, good), TransportError);   // no such slot
  EXPECT_THROW(a.t->local_endpoint(-1), TransportError);

  // The slot is still usable: the right blob connects it.
  a.t->connect_peer(pa, good);
  b.t->connect_peer(pb, a.t->local_endpoint(pa));
  EXPECT_THROW(a.t->connect_peer(pa, good), TransportError);  // already connected
  Exposed at_b(*b.t, 16);
  std::vector<uint64_t> slot(1, 0);
  auto slot_mr = a.t->register_memory(slot.data(), 8);
  auto key = a.t->unpack_key(pa, at_b.mr->packed_key());
  a.run(atomic_work(Op::FetchAdd, pa, slot.data(), slot_mr.get(), at_b.addr(8), key.get(), 41));
  a.run(atomic_work(Op::FetchAdd, pa, slot.data(), slot_mr.get(), at_b.addr(8), key.get(), 1));
  EXPECT_EQ(slot[0], 41u);

  // A collective transport has no run-time peers.
  TransportConfig cfg = dynamic_config();
  cfg.dynamic_peers = false;
  cfg.rank = 0;
  cfg.nranks = 1;
  auto collective_t = rwin::transport::make_transport(cfg);
  EXPECT_THROW(collective_t->add_peer(), TransportError);
  EXPECT_THROW(collective_t->local_endpoint(0), TransportError);
}

}  // namespace

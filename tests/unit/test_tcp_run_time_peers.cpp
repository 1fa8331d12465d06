// rwin's own tcp transport with peers met at run time (the agent's mode, transport.h "Peers met at
// run time"): two transports in one process wired by hand as the agent wires them, the data path
// both ways, the wake-up descriptor an idle owner sleeps on, and strangers at the listener, which
// stays open for the transport's whole life: only the peer an endpoint was made for gets in.
#include <gtest/gtest.h>

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "socket_util.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace {

namespace tp = rwin::transport;
namespace w = rwin::transport::tcpw;
using namespace std::chrono_literals;

std::unique_ptr<tp::Transport> run_time_transport() {
  tp::TransportConfig cfg;
  cfg.name = "tcp";
  cfg.dynamic_peers = true;
  cfg.listen_host = "127.0.0.1";
  return tp::make_transport(cfg);
}

// Polls a transport until the completion `cookie` arrives (10 s at most): its error, or "" on
// success. Completions that arrive with it in one poll are kept for the later calls that ask for
// them (one Poller per test: the transports' addresses are its keys).
struct Poller {
  std::map<std::pair<const tp::Transport*, uint64_t>, std::string> early;
  std::string operator()(tp::Transport& t, uint64_t cookie) {
    std::vector<tp::Completion> got;
    const auto end = std::chrono::steady_clock::now() + 10s;
    for (;;) {
      for (const auto& c : got) early[{&t, c.cookie}] = c.ok ? std::string() : c.error;
      got.clear();
      if (auto it = early.find({&t, cookie}); it != early.end()) {
        std::string r = it->second;
        early.erase(it);
        return r;
      }
      if (std::chrono::steady_clock::now() >= end) return "no completion within 10 s";
      t.poll(got);
    }
  }
};

// A and B wired as the agent does: A adds p and sends its endpoint; B adds q, connects it and
// answers with its own; A connects p.
struct WiredPair {
  std::unique_ptr<tp::Transport> a = run_time_transport(), b = run_time_transport();
  int p = a->add_peer();  // A's index for B
  int q = b->add_peer();  // B's index for A
  WiredPair() {
    b->connect_peer(q, a->local_endpoint(p));
    a->connect_peer(p, b->local_endpoint(q));
  }
};

w::Endpoint endpoint_of(const std::vector<uint8_t>& blob) {
  w::Endpoint e;
  EXPECT_EQ(blob.size(), sizeof e);
  std::memcpy(&e, blob.data(), sizeof e);
  return e;
}

TEST(TcpRunTimePeers, WriteReadAtomicsBothWays) {
  Poller complete;
  WiredPair x;
  auto ra = x.a->allocate(1 << 20), rb = x.b->allocate(1 << 20);
  auto ka = x.b->unpack_key(x.q, ra->packed_key());
  auto kb = x.a->unpack_key(x.p, rb->packed_key());
  std::vector<char> src(300000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 1);
  auto lsrc = x.a->register_memory(src.data(), src.size());

  // A writes into B, then adds 5 to B's word 0 after it.
  tp::Work wr{.op = tp::Op::Write, .peer = x.p, .local = src.data(), .local_mr = lsrc.get(),
              .remote_addr = kb->base() + 4096, .rkey = kb.get(), .bytes = src.size(), .cookie = 1};
  ASSERT_EQ(x.a->post(wr), tp::PostResult::Ok);
  int64_t old = -1;
  tp::Work add{.op = tp::Op::FetchAdd, .peer = x.p, .local = &old, .remote_addr = kb->base(), .rkey = kb.get(),
               .operand = 5, .cookie = 2};
  ASSERT_EQ(x.a->post(add), tp::PostResult::Ok);
  EXPECT_EQ(complete(*x.a, 1), "");
  EXPECT_EQ(complete(*x.a, 2), "");
  EXPECT_EQ(old, 0);
  // B never polled: its receiver thread applied both.
  EXPECT_EQ(std::memcmp(static_cast<char*>(rb->addr()) + 4096, src.data(), src.size()), 0);
  EXPECT_EQ(*static_cast<int64_t*>(rb->addr()), 5);

  std::vector<char> back(src.size());  // B reads it back from A after A wrote there too
  std::memcpy(ra->addr(), src.data(), src.size());
  auto lback = x.b->register_memory(back.data(), back.size());
  tp::Work rd{.op = tp::Op::Read, .peer = x.q, .local = back.data(), .local_mr = lback.get(),
              .remote_addr = ka->base(), .rkey = ka.get(), .bytes = back.size(), .cookie = 3};
  ASSERT_EQ(x.b->post(rd), tp::PostResult::Ok);
  EXPECT_EQ(complete(*x.b, 3), "");
  EXPECT_EQ(back, src);
}

TEST(TcpRunTimePeers, SelfAndExposedCallerMemory) {
  Poller complete;
  auto t = run_time_transport();
  const int me = t->add_peer();
  t->connect_peer(me, t->local_endpoint(me));
  alignas(8) char mine[4096] = {};
  auto exposed = t->expose_memory(mine, sizeof mine);
  auto overlapping = t->expose_memory(mine + 100, 10);  // independent regions, as verbs MRs
  auto key = t->unpack_key(me, exposed->packed_key());
  const char msg[] = "to myself";
  tp::Work wr{.op = tp::Op::Write, .peer = me, .local = const_cast<char*>(msg), .remote_addr = key->base() + 8,
              .rkey = key.get(), .bytes = sizeof msg, .cookie = 7};
  ASSERT_EQ(t->post(wr), tp::PostResult::Ok);
  tp::Work fl{.op = tp::Op::Flush, .peer = me, .cookie = 8};
  ASSERT_EQ(t->post(fl), tp::PostResult::Ok);
  EXPECT_EQ(complete(*t, 7), "");
  EXPECT_EQ(complete(*t, 8), "");
  EXPECT_STREQ(mine + 8, msg);
  // Gone once its destructor returned: a write to it is refused, naming the region.
  exposed.reset();
  wr.cookie = 9;
  ASSERT_EQ(t->post(wr), tp::PostResult::Ok);
  fl.cookie = 10;
  ASSERT_EQ(t->post(fl), tp::PostResult::Ok);
  const std::string err = complete(*t, 10);
  EXPECT_NE(err.find("refused it"), std::string::npos) << err;
  EXPECT_NE(err.find("region"), std::string::npos) << err;
}

TEST(TcpRunTimePeers, SetUpErrorsAreNamed) {
  auto t = run_time_transport();
  const auto msg = [](auto&& f) {
    try {
      f();
    } catch (const tp::TransportError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([&] { t->local_endpoint(0); }).find("no such run-time peer"), std::string::npos);
  const int p = t->add_peer();
  const std::vector<uint8_t> three{1, 2, 3};
  EXPECT_NE(msg([&] { t->connect_peer(p, three); }).find("its endpoint has 3 bytes"), std::string::npos);
  auto blob = t->local_endpoint(p);
  blob[0] ^= 0xff;  // magic
  EXPECT_NE(msg([&] { t->connect_peer(p, blob); }).find("not a tcp endpoint"), std::string::npos);
  // Posting to a peer before connect_peer fails that peer, named.
  tp::Work fl{.op = tp::Op::Flush, .peer = p};
  EXPECT_EQ(t->post(fl), tp::PostResult::PeerFailed);
  EXPECT_NE(t->peer_error(p).find("posted before connect_peer()"), std::string::npos) << t->peer_error(p);
  // A collective-mode transport has no run-time peers.
  tp::TransportConfig cfg;
  cfg.name = "tcp";
  cfg.rank = 0;
  cfg.nranks = 1;
  cfg.ifname = "lo";
  auto job = tp::make_transport(cfg);
  EXPECT_NE(msg([&] { job->add_peer(); }).find("run-time peers"), std::string::npos);
}

// The listener stays open: a stranger who knows no endpoint's secret, one who names a peer that
// does not exist, and a replay of a peer already connected are all dropped before a frame is read,
// and the peers keep working.
TEST(TcpRunTimePeers, StrangersAtTheListener) {
  Poller complete;
  WiredPair x;
  auto rb = x.b->allocate(4096);
  auto kb = x.a->unpack_key(x.p, rb->packed_key());
  const w::Endpoint eb = endpoint_of(x.b->local_endpoint(x.q));
  const int extra = x.b->add_peer();  // added, never connected: the stranger's target
  const auto knock = [&](int32_t dst) {
    const int fd = test_sock::connect_loopback(eb.port, 5);
    if (fd < 0) return std::string("connect failed");
    w::Hello h;
    h.kind = static_cast<uint16_t>(w::HelloKind::RunTime);
    h.src = 0;
    h.dst = dst;
    w::Challenge c;
    std::string result = "accepted";
    if (!test_sock::io(fd, &h, sizeof h, true) || !test_sock::io(fd, &c, sizeof c, false)) {
      result = "closed before a challenge";
    } else if (c.status != 0) {
      result = "refused, status " + std::to_string(c.status);
    } else {
      w::Proof pr;  // no secret: any mac is wrong
      std::memset(pr.mac, 0x5a, sizeof pr.mac);
      w::Accept a;
      if (!test_sock::io(fd, &pr, sizeof pr, true) || !test_sock::io(fd, &a, sizeof a, false)) result = "dropped after the proof";
    }
    ::close(fd);
    return result;
  };
  EXPECT_EQ(knock(extra), "dropped after the proof");               // wrong proof
  EXPECT_EQ(knock(extra + 5), "refused, status 3");                // no such peer
  EXPECT_EQ(knock(x.q), "refused, status 3");                      // connected already
  const int fd = test_sock::connect_loopback(eb.port, 5);          // garbage
  ASSERT_GE(fd, 0);
  const char junk[64] = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(test_sock::io(fd, const_cast<char*>(junk), sizeof junk, true));
  w::Challenge c;  // at most a refusal, then the close
  if (test_sock::io(fd, &c, sizeof c, false)) {
    EXPECT_NE(c.status, 0);
  }
  char one;
  EXPECT_LE(::recv(fd, &one, 1, 0), 0);
  ::close(fd);

  const int64_t v = 41;
  // A's connection is untouched.
  tp::Work wr{.op = tp::Op::Write, .peer = x.p, .local = const_cast<int64_t*>(&v), .remote_addr = kb->base(),
              .rkey = kb.get(), .bytes = sizeof v, .cookie = 1};
  ASSERT_EQ(x.a->post(wr), tp::PostResult::Ok);
  tp::Work fl{.op = tp::Op::Flush, .peer = x.p, .cookie = 2};
  ASSERT_EQ(x.a->post(fl), tp::PostResult::Ok);
  EXPECT_EQ(complete(*x.a, 2), "");
  EXPECT_EQ(*static_cast<int64_t*>(rb->addr()), 41);
}

// An owner that found nothing to do arms and sleeps on wait_fd(): a peer's write (served by the
// receiver thread) makes it readable, so a waiter on a signal word wakes without a timer.
TEST(TcpRunTimePeers, WaitFdWakesForAPeersWrite) {
  Poller complete;
  WiredPair x;
  auto rb = x.b->allocate(4096);
  auto kb = x.a->unpack_key(x.p, rb->packed_key());
  ASSERT_GE(x.b->wait_fd(), 0);
  std::vector<tp::Completion> none;
  bool armed = false;
  for (int i = 0; i < 1000 && !armed; ++i) {  // the hand-shake's own rounds may refuse the first arms
    x.b->poll(none);
    armed = x.b->arm();
  }
  ASSERT_TRUE(armed);
  pollfd pfd{x.b->wait_fd(), POLLIN, 0};
  tp::Work add{.op = tp::Op::AtomicAdd, .peer = x.p, .remote_addr = kb->base(), .rkey = kb.get(), .operand = 3,
               .cookie = 1};
  ASSERT_EQ(x.a->post(add), tp::PostResult::Ok);
  EXPECT_EQ(complete(*x.a, 1), "");
  // The sleeper wakes (a wake-up may also come from a round that found the add not yet there: the
  // sleeper then polls, arms and sleeps again, as the agent does) and sees the add, never by a timeout.
  const auto word = [&] {  // read as a waiter reads its signal word (the target applied a CPU atomic)
    return std::atomic_ref<int64_t>(*static_cast<int64_t*>(rb->addr())).load(std::memory_order_acquire);
  };
  for (int sleeps = 0; word() != 3; ++sleeps) {
    ASSERT_LT(sleeps, 100);
    ASSERT_EQ(::poll(&pfd, 1, 10000), 1) << "asleep 10 s while a peer's add was served";
    armed = false;
    for (int i = 0; i < 1000 && !armed && word() != 3; ++i) {
      x.b->poll(none);
      armed = x.b->arm();
    }
  }
}

}  // namespace

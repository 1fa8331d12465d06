// The store's authentication, rank binding, liveness leases and deadlines (issue 9).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "socket_util.h"
#include "store_test_util.h"

namespace rb = rwin::bootstrap;
namespace wire = rwin::bootstrap::wire;
using namespace std::chrono_literals;
using Kind = rb::BootstrapError::Kind;
using Clock = std::chrono::steady_clock;

namespace {

using store_test::bytes;
using store_test::contains;
using store_test::expect_error;
using store_test::free_port;
using store_test::local;
using store_test::RawConn;
using store_test::run_ranks;

int connect_raw(uint16_t port) { return test_sock::connect_loopback(port); }

std::vector<uint8_t> frame(uint16_t op, const std::vector<uint8_t>& body, uint16_t version = wire::kVersion) {
  auto w = wire::start_frame(op);
  w.buf()[4] = static_cast<uint8_t>(version);
  w.buf()[5] = static_cast<uint8_t>(version >> 8);
  w.bytes(body.data(), body.size());
  wire::finish_frame(w);
  return w.buf();
}

std::vector<uint8_t> set_body(const std::string& key, const std::string& value) {
  wire::Writer w;
  w.str(key);
  w.str(value);
  return w.buf();
}

std::vector<uint8_t> hello_frame(const wire::Hello& h) {
  wire::Writer w;
  w.bytes(h.nonce, sizeof h.nonce);
  w.u32(h.rank);
  w.u32(h.nranks);
  w.u16(h.role);
  w.u16(h.flags);
  return frame(static_cast<uint16_t>(wire::Op::Hello), w.buf());
}

// Polls `f` until it returns true or `cap` passes.
bool eventually(const std::function<bool()>& f, std::chrono::milliseconds cap = 10s) {
  const auto deadline = Clock::now() + cap;
  while (Clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return f();
}

rb::StoreClientConfig client(const std::string& key, int rank = -1, int nranks = 0) {
  rb::StoreClientConfig c;
  c.job_key = key;
  c.rank = rank;
  c.nranks = nranks;
  return c;
}

// A server that does the handshake correctly (no key) and then never answers a request: a
// stopped or wedged store as a client sees it.
class MuteServer {
 public:
  MuteServer() {
    listen_ = test_sock::listen_loopback(64, &port_);
    EXPECT_GE(listen_, 0) << std::strerror(errno);
    thread_ = std::thread([this] { run(); });
  }
  ~MuteServer() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
    for (int fd : conns_) ::close(fd);
  }
  uint16_t port() const { return port_; }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listen_, POLLIN, 0};
      if (::poll(&p, 1, 20) != 1) continue;
      const int fd = ::accept(listen_, nullptr, nullptr);
      if (fd < 0) continue;
      conns_.push_back(fd);
      uint8_t buf[wire::kHeaderSize + wire::kHelloBody];
      size_t got = 0;
      while (got < sizeof buf && !stop_) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 20) != 1) continue;
        const ssize_t k = ::recv(fd, buf + got, sizeof buf - got, 0);
        if (k <= 0) break;
        got += static_cast<size_t>(k);
      }
      if (got != sizeof buf) continue;
      wire::Request rq;
      if (!wire::decode_request(wire::Op::Hello, buf + wire::kHeaderSize, wire::kHelloBody, rq)) continue;
      uint8_t nonce[wire::kNonce];
      rb::auth::random_bytes(nonce, sizeof nonce);
      const auto mac = rb::auth::hmac("", "rwin-store-server", wire::transcript(rq.hello.nonce, nonce, rq.hello));
      std::vector<uint8_t> body(nonce, nonce + sizeof nonce);
      body.insert(body.end(), mac.begin(), mac.end());
      auto f = frame(static_cast<uint16_t>(wire::Status::Ok), body);
      (void)::send(fd, f.data(), f.size(), MSG_NOSIGNAL);
      // Reads the client's proof and answers OK without checking it; after that, silence.
      uint8_t proof[wire::kHeaderSize + wire::kMac];
      got = 0;
      while (got < sizeof proof && !stop_) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 20) != 1) continue;
        const ssize_t k = ::recv(fd, proof + got, sizeof proof - got, 0);
        if (k <= 0) break;
        got += static_cast<size_t>(k);
      }
      auto ok = frame(static_cast<uint16_t>(wire::Status::Ok), {});
      (void)::send(fd, ok.data(), ok.size(), MSG_NOSIGNAL);
    }
  }
  int listen_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> conns_;
  std::thread thread_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Pure decoding (what a fuzz harness calls)

TEST(StoreWire, DecodeHeaderEnforcesStateAndCaps) {
  wire::Header h;
  std::string why;
  auto set = frame(static_cast<uint16_t>(wire::Op::Set), set_body("k", "v"));
  EXPECT_EQ(wire::decode_header(set.data(), 11, wire::ConnState::Data, h, why), wire::HeaderResult::NeedMore);
  EXPECT_EQ(wire::decode_header(set.data(), set.size(), wire::ConnState::Data, h, why), wire::HeaderResult::Ok);
  EXPECT_EQ(h.body_len, set.size() - wire::kHeaderSize);
  // Before authentication a SET is refused by its header alone.
  EXPECT_EQ(wire::decode_header(set.data(), set.size(), wire::ConnState::ExpectHello, h, why),
            wire::HeaderResult::NotAllowed);
  EXPECT_TRUE(contains(why, "set not allowed before hello")) << why;
  EXPECT_EQ(wire::decode_header(set.data(), set.size(), wire::ConnState::Lease, h, why), wire::HeaderResult::NotAllowed);
  // A hello may not declare a large body.
  auto big_hello = frame(static_cast<uint16_t>(wire::Op::Hello), std::vector<uint8_t>(wire::kHelloBody + 1));
  EXPECT_EQ(wire::decode_header(big_hello.data(), big_hello.size(), wire::ConnState::ExpectHello, h, why),
            wire::HeaderResult::TooLong);
  auto old = frame(static_cast<uint16_t>(wire::Op::Set), {}, 1);
  EXPECT_EQ(wire::decode_header(old.data(), old.size(), wire::ConnState::Data, h, why), wire::HeaderResult::BadVersion);
  auto unknown = frame(99, {});
  EXPECT_EQ(wire::decode_header(unknown.data(), unknown.size(), wire::ConnState::Data, h, why),
            wire::HeaderResult::UnknownOp);
  std::vector<uint8_t> junk(12, 0xAB);
  EXPECT_EQ(wire::decode_header(junk.data(), junk.size(), wire::ConnState::Data, h, why), wire::HeaderResult::BadMagic);
}

TEST(StoreWire, DecodeRequestRejectsInnerLengthsAndBadHellos) {
  wire::Request rq;
  auto body = set_body("key", "value");
  ASSERT_TRUE(wire::decode_request(wire::Op::Set, body.data(), body.size(), rq));
  EXPECT_EQ(rq.key, "key");
  EXPECT_EQ(rq.value, bytes("value"));
  body.push_back(0);  // trailing byte
  EXPECT_FALSE(wire::decode_request(wire::Op::Set, body.data(), body.size(), rq));
  const std::vector<uint8_t> huge_count = {0xFF, 0xFF, 0x00, 0x00};  // 65535 keys in 4 bytes
  EXPECT_FALSE(wire::decode_request(wire::Op::Wait, huge_count.data(), huge_count.size(), rq));
  std::vector<uint8_t> hello(wire::kHelloBody, 0);
  EXPECT_FALSE(wire::decode_request(wire::Op::Hello, hello.data(), hello.size(), rq)) << "role 0";
  hello[wire::kNonce + 8] = static_cast<uint8_t>(wire::Role::Lease);
  ASSERT_TRUE(wire::decode_request(wire::Op::Hello, hello.data(), hello.size(), rq));
  EXPECT_EQ(rq.hello.role, static_cast<uint16_t>(wire::Role::Lease));
  EXPECT_FALSE(wire::decode_request(wire::Op::Hello, hello.data(), hello.size() - 1, rq));
  // Random bodies never read out of bounds (ASan) and mostly fail.
  std::mt19937 rng(99);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> b(rng() % 64);
    for (auto& x : b) x = static_cast<uint8_t>(rng() % 4 == 0 ? 0 : rng());
    const auto op = static_cast<wire::Op>(1 + rng() % 8);
    wire::Request r2;
    (void)wire::decode_request(op, b.data(), b.size(), r2);
  }
}

// ---------------------------------------------------------------------------------------------
// Authentication

TEST(StoreAuth, RightKeyIsServed) {
  rb::TcpStoreServer server("127.0.0.1", 0, {"s3cret", 0});
  rb::TcpStore store(local(server.port()), 5s, client("s3cret"));
  store.set("a", bytes("1"));
  EXPECT_EQ(store.get("a", 1s), bytes("1"));
  EXPECT_EQ(store.add("n", 2), 2);
}

TEST(StoreAuth, WrongOrMissingKeyGetsNothing) {
  rb::TcpStoreServer server("127.0.0.1", 0, {"s3cret", 0});
  rb::TcpStore good(local(server.port()), 5s, client("s3cret"));
  good.set("secret/value", bytes("rkey"));

  auto wrong = expect_error([&] { rb::TcpStore s(local(server.port()), 2s, client("guess")); });
  EXPECT_EQ(wrong.kind(), Kind::Config);
  EXPECT_TRUE(contains(wrong.what(), "did not prove it knows the job key")) << wrong.what();
  auto none = expect_error([&] { rb::TcpStore s(local(server.port()), 2s, client("")); });
  EXPECT_EQ(none.kind(), Kind::Config);
  EXPECT_TRUE(contains(none.what(), "requires the job key")) << none.what();

  // By hand: a correct hello, then a proof made with the wrong key, then requests anyway.
  {
    RawConn c(server.port());
    wire::Hello h;
    rb::auth::random_bytes(h.nonce, sizeof h.nonce);
    h.rank = 1;
    h.nranks = 2;
    h.role = static_cast<uint16_t>(wire::Role::Data);
    h.flags = wire::kFlagHasKey;
    c.send(hello_frame(h));
    const auto mac = rb::auth::hmac("guess", "rwin-store-client", std::vector<uint8_t>(64));
    c.send(frame(static_cast<uint16_t>(wire::Op::Auth), std::vector<uint8_t>(mac.begin(), mac.end())));
    c.send(frame(static_cast<uint16_t>(wire::Op::Set), set_body("secret/value", "forged")));
    wire::Writer g;
    g.str("secret/value");
    c.send(frame(static_cast<uint16_t>(wire::Op::Get), g.buf()));
    size_t got = 0;
    EXPECT_TRUE(c.closed_by_server(10s, &got));
    // The challenge (12 + 64 bytes) and one refusal line; never the value.
    EXPECT_LT(got, 200u);
  }
  // Valid frames without any handshake are refused by their header.
  for (uint16_t op : {1, 2, 3, 4, 5, 7, 8}) {
    RawConn c(server.port());
    c.send(frame(op, op == 1 ? set_body("secret/value", "forged") : std::vector<uint8_t>{}));
    size_t got = 1;
    EXPECT_TRUE(c.closed_by_server(10s, &got)) << "op " << op;
    EXPECT_EQ(got, 0u) << "op " << op;
  }
  EXPECT_EQ(good.get("secret/value", 1s), bytes("rkey"));
  EXPECT_EQ(good.check({"forged"}), std::vector<bool>{false});
}

TEST(StoreAuth, FakeServerWithoutTheKeyIsDetectedBeforeTheClientProvesAnything) {
  uint16_t port = 0;
  const int lfd = test_sock::listen_loopback(4, &port);
  ASSERT_GE(lfd, 0) << std::strerror(errno);
  size_t received = 0;
  std::thread fake([&] {
    const int fd = ::accept(lfd, nullptr, nullptr);
    ASSERT_GE(fd, 0);
    uint8_t buf[4096];
    // Reads the hello, answers with a made-up challenge and MAC, then records all that follows.
    size_t n = 0;
    while (n < wire::kHeaderSize + wire::kHelloBody) {
      const ssize_t k = ::recv(fd, buf + n, sizeof buf - n, 0);
      if (k <= 0) break;
      n += static_cast<size_t>(k);
    }
    std::vector<uint8_t> body(wire::kHelloReplyBody);
    rb::auth::random_bytes(body.data(), body.size());
    auto f = frame(static_cast<uint16_t>(wire::Status::Ok), body);
    (void)::send(fd, f.data(), f.size(), MSG_NOSIGNAL);
    for (;;) {
      const ssize_t k = ::recv(fd, buf + n, sizeof buf - n, 0);
      if (k <= 0) break;
      n += static_cast<size_t>(k);
    }
    received = n;
    ::close(fd);
  });
  auto e = expect_error([&] { rb::TcpStore s(local(port), 5s, client("s3cret", 1, 2)); });
  fake.join();
  ::close(lfd);
  EXPECT_EQ(e.kind(), Kind::Config);
  EXPECT_TRUE(contains(e.what(), "did not prove it knows the job key")) << e.what();
  EXPECT_EQ(received, wire::kHeaderSize + wire::kHelloBody) << "the client sent more than its hello";
}

TEST(StoreAuth, GarbageAndOversizedHellosCloseTheConnection) {
  rb::TcpStoreServer server("127.0.0.1", 0, {"k", 0});
  rb::TcpStore good(local(server.port()), 5s, client("k"));
  good.set("keep", bytes("x"));
  std::mt19937 rng(5);
  std::vector<uint8_t> noise(100000);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  {
    RawConn c(server.port());
    c.send(noise);
    EXPECT_TRUE(c.closed_by_server(10s)) << "random bytes";
  }
  {
    RawConn c(server.port());
    c.send(frame(static_cast<uint16_t>(wire::Op::Hello), std::vector<uint8_t>(1 << 16)));
    EXPECT_TRUE(c.closed_by_server(10s)) << "oversized hello";
  }
  {
    RawConn c(server.port());
    c.send(frame(static_cast<uint16_t>(wire::Op::Hello), std::vector<uint8_t>(wire::kHelloBody, 0)));
    EXPECT_TRUE(c.closed_by_server(10s)) << "hello with a bad role";
  }
  EXPECT_EQ(good.get("keep", 1s), bytes("x"));
}

TEST(StoreAuth, IdleStrangerIsDroppedAfterTheHandshakeDeadline) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  RawConn idle(server.port());
  const auto t0 = Clock::now();
  EXPECT_TRUE(idle.closed_by_server(20s));
  EXPECT_GE(Clock::now() - t0, 3s);  // not before the deadline (5 s, checked once a second)
}

TEST(StoreAuth, WildcardBindIsRefused) {
  EXPECT_EQ(expect_error([] { rb::TcpStoreServer s("0.0.0.0", 0); }).kind(), Kind::Config);
  EXPECT_EQ(expect_error([] { rb::TcpStoreServer s("", 0); }).kind(), Kind::Config);
  // A wildcard root is not loopback: without a key the job refuses to start, naming the variable.
  auto e = expect_error([] { rb::Bootstrap bs(0, 1, rb::HostPort{"0.0.0.0", 0}, 1s); });
  EXPECT_EQ(e.kind(), Kind::Config);
  EXPECT_TRUE(contains(e.what(), "RWIN_JOB_KEY")) << e.what();
  rb::BootstrapConfig cfg;
  cfg.job_key = "k";
  auto e2 = expect_error([&] { rb::Bootstrap bs(0, 1, rb::HostPort{"0.0.0.0", 0}, cfg); });
  EXPECT_TRUE(contains(e2.what(), "wildcard")) << e2.what();
}

// ---------------------------------------------------------------------------------------------
// Rank binding

TEST(StoreLease, DuplicateRankIsRefusedAndLoggedWhileTheFirstRunsOn) {
  rb::TcpStoreServer server("127.0.0.1", 0, {"k", 3});
  rb::StoreLease first(local(server.port()), 5s, client("k", 2, 3));
  testing::internal::CaptureStderr();
  auto e = expect_error([&] { rb::StoreLease second(local(server.port()), 5s, client("k", 2, 3)); });
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(e.kind(), Kind::Config);
  EXPECT_TRUE(contains(e.what(), "rank 2 already joined from 127.0.0.1:")) << e.what();
  EXPECT_TRUE(contains(log, "rwin store: rank 2 already joined from 127.0.0.1:")) << log;
  EXPECT_TRUE(contains(log, "; refusing 127.0.0.1:")) << log;
  // The refused one counts as nothing: no failure reported, the first lease is intact.
  rb::StoreLease other(local(server.port()), 5s, client("k", 1, 3));
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(other.poll().empty());
  EXPECT_TRUE(first.poll().empty());
  // A rank outside the job, or a different job size, is refused too.
  EXPECT_EQ(expect_error([&] { rb::StoreLease l(local(server.port()), 5s, client("k", 3, 3)); }).kind(), Kind::Config);
  EXPECT_EQ(expect_error([&] { rb::StoreLease l(local(server.port()), 5s, client("k", 0, 4)); }).kind(), Kind::Config);
}

TEST(Bootstrap, ImpostorRankIsRefusedAndTheJobCompletes) {
  constexpr int n = 3;
  const auto root = local(free_port());
  rb::BootstrapConfig cfg;
  cfg.startup_timeout = 20s;
  cfg.op_timeout = 20s;
  cfg.job_key = "job-key";
  std::atomic<bool> started{false};
  std::atomic<bool> impostor_done{false};
  std::string impostor_error;
  auto errors = run_ranks(n + 1, [&](int i) {
    if (i == n) {  // the impostor claims rank 2 once the real job is up
      while (!started) std::this_thread::sleep_for(1ms);
      try {
        rb::Bootstrap bs(2, n, root, cfg);
      } catch (const rb::BootstrapError& e) {
        impostor_error = e.what();
      }
      impostor_done = true;
      return;
    }
    rb::Bootstrap bs(i, n, root, cfg);
    started = true;
    while (!impostor_done) std::this_thread::sleep_for(1ms);
    auto all = bs.allgather(bytes("r" + std::to_string(i)));
    for (int p = 0; p < n; ++p) {
      if (all[static_cast<size_t>(p)] != bytes("r" + std::to_string(p))) throw std::runtime_error("wrong data");
    }
    bs.barrier();
    if (!bs.failures().empty()) throw std::runtime_error("a failure was reported");
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  EXPECT_TRUE(contains(impostor_error, "rank 2 already joined from")) << impostor_error;
}

// ---------------------------------------------------------------------------------------------
// Liveness

TEST(StoreLease, CloseWithoutGoodbyeIsReportedToEveryOtherLeaseAndEndsParkedRequests) {
  rb::TcpStoreServer server("127.0.0.1", 0, {"", 3});
  rb::StoreLease l0(local(server.port()), 5s, client("", 0, 3));
  rb::StoreLease l1(local(server.port()), 5s, client("", 1, 3));
  auto l2 = std::make_unique<rb::StoreLease>(local(server.port()), 5s, client("", 2, 3));
  rb::Bytes got;
  rb::BootstrapError parked(Kind::Config, "");
  std::thread waiter([&] {
    rb::TcpStore s(local(server.port()), 5s, client("", 0, 3));
    parked = expect_error([&] { s.get("never", 60s); });
  });
  std::this_thread::sleep_for(100ms);  // lets the get park (either way it ends with PeerFailed)
  const auto t0 = Clock::now();
  l2.reset();  // as kill -9 would: the socket closes, no goodbye
  std::vector<rb::PeerFailure> f0, f1;
  EXPECT_TRUE(eventually([&] {
    for (auto& f : l0.poll()) f0.push_back(f);
    for (auto& f : l1.poll()) f1.push_back(f);
    return !f0.empty() && !f1.empty();
  }));
  waiter.join();
  ASSERT_EQ(f0.size(), 1u);
  ASSERT_EQ(f1.size(), 1u);
  EXPECT_EQ(f0[0].rank, 2);
  EXPECT_EQ(f0[0].how, "its bootstrap connection closed");
  EXPECT_LT(f0[0].when - t0, 5s);  // generous: it is one socket close on loopback
  EXPECT_EQ(parked.kind(), Kind::PeerFailed) << parked.what();
  EXPECT_TRUE(contains(parked.what(), "rank 2 failed (its bootstrap connection closed)")) << parked.what();
  // Reported once; later requests that cannot be satisfied fail at once instead of parking.
  EXPECT_TRUE(l0.poll().empty());
  rb::TcpStore s(local(server.port()), 5s, client("", 1, 3));
  EXPECT_EQ(expect_error([&] { s.wait({"never"}, 60s); }).kind(), Kind::PeerFailed);
  s.set("now", {});
  s.wait({"now"}, 1s);  // satisfiable requests still work
  // A lease that joins later hears of the failure too.
  EXPECT_EQ(expect_error([&] { rb::StoreLease again(local(server.port()), 5s, client("", 2, 3)); }).kind(),
            Kind::Config);
}

// A rank that gives up after an error leaves with its reason: the others learn it failed, and why,
// so their messages lead back to the first failure; a later wait that cannot be met fails at once.
TEST(StoreLease, GoodbyeWithAReasonIsAFailureThatSaysWhy) {
  rb::TcpStoreServer server("127.0.0.1", 0, {"", 3});
  rb::StoreLease l0(local(server.port()), 5s, client("", 0, 3));
  rb::StoreLease l2(local(server.port()), 5s, client("", 2, 3));
  {
    rb::StoreLease l1(local(server.port()), 5s, client("", 1, 3));
    l1.goodbye(2s, "peer 3 failed (its bootstrap connection closed)");
  }
  for (rb::StoreLease* l : {&l0, &l2}) {
    std::vector<rb::PeerFailure> seen;
    const auto until = Clock::now() + 10s;
    while (seen.empty() && Clock::now() < until) {
      seen = l->poll();
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].rank, 1);
    EXPECT_TRUE(contains(seen[0].how, "it left the job after an error: peer 3 failed (its bootstrap connection closed)"))
        << seen[0].how;
  }
  rb::TcpStore s(local(server.port()), 5s, client("", 0, 3));
  EXPECT_EQ(expect_error([&] { s.wait({"never"}, 5s); }).kind(), Kind::PeerFailed);
}

TEST(StoreLease, GoodbyeThenCloseIsNoFailure) {
  rb::TcpStoreServer server("127.0.0.1", 0, {"", 2});
  rb::StoreLease l0(local(server.port()), 5s, client("", 0, 2));
  {
    rb::StoreLease l1(local(server.port()), 5s, client("", 1, 2));
    l1.goodbye(2s);
  }
  EXPECT_TRUE(server.wait_until_ranks_left(0, Clock::now() + 10s));
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(l0.poll().empty());
  rb::TcpStore s(local(server.port()), 5s, client("", 0, 2));
  EXPECT_EQ(expect_error([&] { s.get("never", 200ms); }).kind(), Kind::Timeout);
}

TEST(Bootstrap, RankUnwindingFromAnErrorIsReportedFailedToBlockedCollectives) {
  constexpr int n = 3;
  const auto root = local(free_port());
  std::vector<std::vector<rb::PeerFailure>> seen(n);
  auto errors = run_ranks(n, [&](int r) {
    rb::Bootstrap bs(r, n, root, 30s);
    if (r == 2) throw std::runtime_error("rank 2 gives up");  // ~Bootstrap runs unwinding: no goodbye
    try {
      if (r == 0) {
        bs.barrier();
      } else {
        bs.barrier(30s, [] {});
      }
    } catch (const rb::BootstrapError& e) {
      EXPECT_EQ(e.kind(), Kind::PeerFailed) << e.what();
      seen[static_cast<size_t>(r)] = bs.failures();
      for (const auto& f : bs.poll_failures()) EXPECT_NE(f.rank, 2) << "rank 2 reported twice";  // (rank 1 may follow)
      throw;
    }
  });
  EXPECT_EQ(errors[2], "rank 2 gives up");
  for (int r : {0, 1}) {
    const std::string& msg = errors[static_cast<size_t>(r)];
    EXPECT_TRUE(contains(msg, "peer 2 failed (its bootstrap connection closed")) << msg;
    // Rank 2's failure comes first; rank 0 may also have heard by then that rank 1, unwinding from
    // its own error, left without a goodbye.
    ASSERT_GE(seen[static_cast<size_t>(r)].size(), 1u) << "rank " << r;
    EXPECT_EQ(seen[static_cast<size_t>(r)][0].rank, 2);
  }
}

TEST(Bootstrap, StoreGoneIsReportedAsRankZeroAndShutdownIsQuick) {
  auto server = std::make_unique<rb::TcpStoreServer>("127.0.0.1", 0, rb::StoreServerConfig{"", 2});
  const auto root = local(server->port());
  std::atomic<int> built{0};
  std::atomic<bool> gone{false};
  std::vector<Clock::duration> shutdown(2);
  std::thread killer([&] {
    while (built < 2) std::this_thread::sleep_for(1ms);
    server.reset();  // the store dies under two running ranks
    gone = true;
  });
  auto errors = run_ranks(2, [&](int r) {
    Clock::time_point t;
    {
      rb::BootstrapConfig cfg;
      cfg.startup_timeout = 10s;
      cfg.op_timeout = 30s;
      cfg.serve = false;
      rb::Bootstrap bs(r, 2, root, cfg);
      ++built;
      while (!gone) std::this_thread::sleep_for(1ms);
      std::vector<rb::PeerFailure> f;
      if (!eventually([&] {
            for (auto& x : bs.poll_failures()) f.push_back(x);
            return !f.empty();
          })) {
        throw std::runtime_error("no failure reported");
      }
      if (f[0].rank != 0 || !contains(f[0].how, "closed the connection")) throw std::runtime_error(f[0].how);
      t = Clock::now();
    }
    shutdown[static_cast<size_t>(r)] = Clock::now() - t;
  });
  killer.join();
  for (auto& e : errors) EXPECT_EQ(e, "");
  for (auto d : shutdown) EXPECT_LT(d, 3s);
}

// ---------------------------------------------------------------------------------------------
// Strangers cannot starve the job

TEST(Bootstrap, ThousandsOfIdleStrangersDoNotStopTheJob) {
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  constexpr rlim_t kWant = 8192;
  if (rl.rlim_cur < kWant) {
    rlimit raised = rl;
    raised.rlim_cur = std::min<rlim_t>(kWant, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &raised);
    getrlimit(RLIMIT_NOFILE, &raised);
    if (raised.rlim_cur < 3500) GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << rl.rlim_max << " is too low";
  }
  constexpr int n = 3;
  const auto root = local(free_port());
  rb::BootstrapConfig cfg;
  cfg.startup_timeout = 30s;
  cfg.op_timeout = 30s;
  cfg.job_key = "k";
  std::atomic<bool> serving{false};
  std::atomic<bool> done{false};
  std::vector<int> strangers;
  std::thread rank0([&] {
    rb::Bootstrap bs(0, n, root, cfg);
    bs.barrier();
    while (!done) std::this_thread::sleep_for(1ms);
  });
  // Rank 0 serves as soon as its constructor starts; wait until it listens, then flood it.
  ASSERT_TRUE(eventually([&] {
    const int fd = connect_raw(root.port);
    if (fd < 0) return false;
    ::close(fd);
    return true;
  }));
  for (int i = 0; i < 3000; ++i) {
    const int fd = connect_raw(root.port);
    if (fd >= 0) strangers.push_back(fd);
  }
  EXPECT_GE(strangers.size(), 3000u);
  serving = true;
  auto errors = run_ranks(n - 1, [&](int i) {
    rb::Bootstrap bs(i + 1, n, root, cfg);
    bs.barrier();
  });
  done = true;
  rank0.join();
  for (auto& e : errors) EXPECT_EQ(e, "");
  for (int fd : strangers) ::close(fd);
}

// ---------------------------------------------------------------------------------------------
// Deadlines

TEST(TcpStore, EveryCallHonoursAShortDeadlineAgainstAStoppedServer) {
  MuteServer mute;
  rb::StoreClientConfig cfg = client("", 1, 2);
  cfg.op_timeout = 200ms;
  rb::TcpStore store(local(mute.port()), 2s, cfg);
  auto timed = [&](const char* what, const std::function<void()>& f) {
    const auto t0 = Clock::now();
    auto e = expect_error(f);
    const auto took = Clock::now() - t0;
    EXPECT_EQ(e.kind(), Kind::Timeout) << what << ": " << e.what();
    EXPECT_LT(took, 1500ms) << what;
  };
  timed("set", [&] { store.set("k", bytes("v")); });
  timed("add", [&] { store.add("k", 1); });
  timed("check", [&] { store.check({"k"}); });
  timed("get", [&] { store.get("k", 200ms); });
  timed("wait", [&] { store.wait({"k"}, 200ms); });
  // The lease's goodbye is bounded too.
  rb::StoreLease lease(local(mute.port()), 2s, client("", 1, 2));
  const auto t0 = Clock::now();
  lease.goodbye(200ms);
  EXPECT_LT(Clock::now() - t0, 1500ms);
}

TEST(TcpStore, HandshakeWithAServerThatNeverAnswersIsBounded) {
  // Listening, never accepting: the kernel completes the TCP handshake, nobody answers.
  uint16_t port = 0;
  const int lfd = test_sock::listen_loopback(4, &port);
  ASSERT_GE(lfd, 0) << std::strerror(errno);
  const auto t0 = Clock::now();
  auto e = expect_error([&] { rb::TcpStore s(local(port), 200ms); });
  EXPECT_LT(Clock::now() - t0, 1500ms);
  EXPECT_EQ(e.kind(), Kind::Timeout) << e.what();
  ::close(lfd);
}

TEST(Bootstrap, StartupTimeoutNeverReportsAnEmptyRankList) {
  for (int trial = 0; trial < 5; ++trial) {
    const auto root = local(free_port());
    rb::BootstrapConfig cfg;
    cfg.startup_timeout = 1ms;
    cfg.op_timeout = 2s;
    auto errors = run_ranks(2, [&](int r) { rb::Bootstrap bs(r, 2, root, cfg); });
    for (const auto& msg : errors) {
      EXPECT_FALSE(contains(msg, "ranks  of")) << msg;
      if (contains(msg, "ranks of")) {
        EXPECT_TRUE(contains(msg, "which ones is unknown")) << msg;
      }
      // A rank that could not ask the store says so ("waiting for ranks of 2 (which ones is unknown:
      // ...)", above); any other wait names the ranks it waited for.
      if (contains(msg, "waiting for ") && !contains(msg, "which ones is unknown")) {
        EXPECT_TRUE(contains(msg, "waiting for rank 0") || contains(msg, "waiting for rank 1")) << msg;
      }
    }
  }
}

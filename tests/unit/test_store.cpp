// TcpStore protocol, server robustness, and Bootstrap collectives with ranks as threads.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
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
#include "store_test_util.h"

namespace rb = rwin::bootstrap;
using namespace std::chrono_literals;
using Kind = rb::BootstrapError::Kind;

namespace {

using store_test::bytes;
using store_test::expect_error;
using store_test::free_port;
using store_test::local;
using store_test::RawConn;
using store_test::run_ranks;

std::vector<uint8_t> header(uint32_t magic, uint16_t version, uint16_t op, uint32_t len) {
  std::vector<uint8_t> h;
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) h.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(magic, 4);
  put(version, 2);
  put(op, 2);
  put(len, 4);
  return h;
}
constexpr uint32_t kMagic = 0x54535752;
constexpr uint16_t kV = rb::wire::kVersion;

// The client half of the store handshake (wire.h) on a raw socket; false if the server refused.
bool raw_handshake(int fd, const std::string& key, uint32_t rank, uint32_t nranks, rb::wire::Role role) {
  namespace w = rb::wire;
  w::Hello hello;
  rb::auth::random_bytes(hello.nonce, sizeof hello.nonce);
  hello.rank = rank;
  hello.nranks = nranks;
  hello.role = static_cast<uint16_t>(role);
  hello.flags = key.empty() ? 0 : w::kFlagHasKey;
  auto f = w::start_frame(static_cast<uint16_t>(w::Op::Hello));
  f.bytes(hello.nonce, sizeof hello.nonce);
  f.u32(hello.rank);
  f.u32(hello.nranks);
  f.u16(hello.role);
  f.u16(hello.flags);
  w::finish_frame(f);
  if (::send(fd, f.buf().data(), f.buf().size(), MSG_NOSIGNAL) != static_cast<ssize_t>(f.buf().size())) return false;
  auto read_n = [&](uint8_t* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      pollfd pf{fd, POLLIN, 0};
      if (::poll(&pf, 1, 10000) != 1) return false;
      const ssize_t k = ::recv(fd, p + got, n - got, 0);
      if (k <= 0) return false;
      got += static_cast<size_t>(k);
    }
    return true;
  };
  uint8_t h[w::kHeaderSize];
  uint8_t reply[w::kHelloReplyBody];
  if (!read_n(h, sizeof h) || w::load_u16(h + 6) != 0 || w::load_u32(h + 8) != sizeof reply) return false;
  if (!read_n(reply, sizeof reply)) return false;
  const auto mac = rb::auth::hmac(key, "rwin-store-client", w::transcript(hello.nonce, reply, hello));
  auto a = w::start_frame(static_cast<uint16_t>(w::Op::Auth));
  a.bytes(mac.data(), mac.size());
  w::finish_frame(a);
  if (::send(fd, a.buf().data(), a.buf().size(), MSG_NOSIGNAL) != static_cast<ssize_t>(a.buf().size())) return false;
  if (!read_n(h, sizeof h)) return false;
  return w::load_u16(h + 6) == 0 && w::load_u32(h + 8) == 0;
}

}  // namespace

TEST(HostPort, ParsesNamesIpv4AndIpv6) {
  auto a = rb::HostPort::parse("node7:4000");
  EXPECT_EQ(a.host, "node7");
  EXPECT_EQ(a.port, 4000);
  auto b = rb::HostPort::parse("127.0.0.1:1");
  EXPECT_EQ(b.host, "127.0.0.1");
  EXPECT_EQ(b.port, 1);
  auto c = rb::HostPort::parse("[::1]:65535");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 65535);
  EXPECT_EQ(c.str(), "[::1]:65535");
  EXPECT_EQ(a.str(), "node7:4000");
}

TEST(HostPort, RejectsBadTextNamingIt) {
  for (const char* bad : {"", "host", "host:", ":4000", "host:65536", "host:12x", "::1:4000", "[::1]4000",
                          "[::1:4000", "host:-1"}) {
    auto e = expect_error([&] { rb::HostPort::parse(bad); });
    EXPECT_EQ(e.kind(), Kind::Config) << bad;
    EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos) << e.what();
  }
}

// Port 0 means "any free port": fine for a job of one (rank 0 is its own store), an error otherwise.
TEST(Bootstrap, PortZeroServesAJobOfOneOnly) {
  rb::Bootstrap one(0, 1, rb::HostPort::parse("127.0.0.1:0"), std::chrono::milliseconds(5000));
  one.barrier();
  EXPECT_EQ(one.allgather(bytes("x")).size(), 1u);
  auto e = expect_error([] { rb::Bootstrap two(0, 2, rb::HostPort::parse("127.0.0.1:0"), std::chrono::milliseconds(500)); });
  EXPECT_EQ(e.kind(), Kind::Config);
  EXPECT_NE(std::string(e.what()).find("port 0"), std::string::npos) << e.what();
}

TEST(TcpStore, SetGetAddCheckWait) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  ASSERT_NE(server.port(), 0);
  rb::TcpStore store(local(server.port()), 5s);
  store.set("a", bytes("hello"));
  store.set("empty", {});
  const rb::Bytes binary = {0, 1, 255, 0, 7};
  store.set("bin", binary);
  EXPECT_EQ(store.get("a", 1s), bytes("hello"));
  EXPECT_EQ(store.get("empty", 1s), rb::Bytes{});
  EXPECT_EQ(store.get("bin", 1s), binary);
  store.set("a", bytes("again"));  // overwrite
  EXPECT_EQ(store.get("a", 1s), bytes("again"));

  EXPECT_EQ(store.add("ctr", 5), 5);
  EXPECT_EQ(store.add("ctr", -7), -2);
  EXPECT_EQ(store.add("ctr", 0), -2);

  EXPECT_EQ(store.check({"a", "nope", "ctr", "empty"}), (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(store.check({}), std::vector<bool>{});
  store.wait({"a", "ctr", "a"}, 1s);  // all exist: returns at once; duplicates are fine
  store.wait({}, 1s);
}

TEST(TcpStore, AddOnNonCounterIsRefusedAndConnectionSurvives) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  rb::TcpStore store(local(server.port()), 5s);
  store.set("text", bytes("abc"));
  auto e = expect_error([&] { store.add("text", 1); });
  EXPECT_EQ(e.kind(), Kind::Protocol);
  EXPECT_NE(std::string(e.what()).find("'text'"), std::string::npos) << e.what();
  EXPECT_EQ(store.get("text", 1s), bytes("abc"));
}

TEST(TcpStore, LargeValueRoundTrips) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  rb::TcpStore store(local(server.port()), 5s);
  rb::Bytes big(8 << 20);
  std::mt19937 rng(7);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  store.set("big", big);
  EXPECT_EQ(store.get("big", 10s), big);
}

TEST(TcpStore, OversizeKeyRejectedBeforeSending) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  rb::TcpStore store(local(server.port()), 5s);
  const std::string key(4097, 'k');
  EXPECT_EQ(expect_error([&] { store.set(key, bytes("x")); }).kind(), Kind::Config);
  EXPECT_EQ(expect_error([&] { store.get(key, 1s); }).kind(), Kind::Config);
  store.set(std::string(4096, 'k'), bytes("max"));
  EXPECT_EQ(store.get(std::string(4096, 'k'), 1s), bytes("max"));
}

TEST(TcpStore, BlockingGetIsReleasedByALaterSet) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  rb::Bytes got;
  std::thread reader([&] {
    rb::TcpStore store(local(server.port()), 5s);
    got = store.get("late", 60s);
  });
  std::this_thread::sleep_for(100ms);  // lets the get park first (the result holds either way)
  rb::TcpStore writer(local(server.port()), 5s);
  writer.set("late", bytes("value"));
  reader.join();
  EXPECT_EQ(got, bytes("value"));
}

TEST(TcpStore, BlockingWaitIsReleasedWhenTheLastKeyAppears) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    rb::TcpStore store(local(server.port()), 5s);
    store.wait({"k1", "k2", "k3"}, 60s);
    done = true;
  });
  rb::TcpStore writer(local(server.port()), 5s);
  writer.set("k1", {});
  writer.add("k3", 1);
  EXPECT_EQ(writer.check({"k1", "k2", "k3"}), (std::vector<bool>{true, false, true}));
  writer.set("k2", {});
  waiter.join();
  EXPECT_TRUE(done);
}

TEST(TcpStore, GetTimeoutNamesKeyAndClientRecovers) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  rb::TcpStore store(local(server.port()), 5s);
  auto e = expect_error([&] { store.get("never/set", 200ms); });
  EXPECT_EQ(e.kind(), Kind::Timeout);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("'never/set'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("200 ms"), std::string::npos) << msg;
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << msg;
  // The timed-out connection is closed; the next call reconnects and works.
  store.set("never/set", bytes("now"));
  EXPECT_EQ(store.get("never/set", 1s), bytes("now"));
}

TEST(TcpStore, WaitTimeoutNamesKeys) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  rb::TcpStore store(local(server.port()), 5s);
  store.set("here", {});
  auto e = expect_error([&] { store.wait({"here", "missing/1"}, 100ms); });
  EXPECT_EQ(e.kind(), Kind::Timeout);
  EXPECT_NE(std::string(e.what()).find("'missing/1'"), std::string::npos) << e.what();
}

TEST(TcpStore, ConnectRetriesUntilTheServerComesUp) {
  const uint16_t port = free_port();
  rb::Bytes got;
  std::thread client([&] {
    rb::TcpStore store(local(port), 20s);
    got = store.get("k", 20s);
  });
  std::this_thread::sleep_for(200ms);  // the client is already retrying (result holds either way)
  rb::TcpStoreServer server("127.0.0.1", port);
  rb::TcpStore writer(local(port), 5s);
  writer.set("k", bytes("v"));
  client.join();
  EXPECT_EQ(got, bytes("v"));
}

TEST(TcpStore, ConnectFailureNamesHostPortAndReason) {
  const uint16_t port = free_port();
  auto e = expect_error([&] { rb::TcpStore store(local(port), 200ms); });
  EXPECT_EQ(e.kind(), Kind::Connection);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::strerror(ECONNREFUSED)), std::string::npos) << msg;
}

TEST(TcpStore, ServerShutdownFailsParkedClientWithConnectionError) {
  auto server = std::make_unique<rb::TcpStoreServer>("127.0.0.1", 0);
  const uint16_t port = server->port();
  rb::TcpStore store(local(port), 5s);
  std::thread stopper([&] {
    std::this_thread::sleep_for(100ms);
    server.reset();
  });
  auto e = expect_error([&] { store.get("never", 60s); });
  stopper.join();
  EXPECT_EQ(e.kind(), Kind::Connection) << e.what();
  // Sticky: later calls report the earlier failure instead of hanging.
  EXPECT_EQ(expect_error([&] { store.set("x", {}); }).kind(), Kind::Connection);
}

TEST(TcpStore, GarbageClosesOnlyThatConnectionAndCorruptsNothing) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  const uint16_t port = server.port();
  rb::TcpStore store(local(port), 5s);
  store.set("keep/a", bytes("alpha"));
  EXPECT_EQ(store.add("keep/n", 41), 41);

  RawConn idle(port);  // connects and sends nothing: must not block anyone

  std::mt19937 rng(12345);
  std::vector<uint8_t> noise(4096);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  noise[0] = 0x00;  // make sure the magic is wrong
  {
    RawConn c(port);
    ASSERT_TRUE(c.send(noise));
    EXPECT_TRUE(c.closed_by_server(10s)) << "random bytes";
  }
  {
    RawConn c(port);
    ASSERT_TRUE(c.send(header(kMagic, 99, 1, 0)));
    EXPECT_TRUE(c.closed_by_server(10s)) << "bad version";
  }
  {
    RawConn c(port);
    ASSERT_TRUE(c.send(header(kMagic, kV, 77, 0)));
    EXPECT_TRUE(c.closed_by_server(10s)) << "unknown op";
  }
  {
    RawConn c(port);
    ASSERT_TRUE(c.send(header(kMagic, kV, 1, 0xFFFFFFFFu)));
    EXPECT_TRUE(c.closed_by_server(10s)) << "huge set length";
  }
  {
    RawConn c(port);
    ASSERT_TRUE(c.send(header(kMagic, kV, 2, 1u << 20)));
    EXPECT_TRUE(c.closed_by_server(10s)) << "get body above its cap";
  }
  {
    // Well-sized frame whose inner key length points past the body.
    RawConn c(port);
    auto f = header(kMagic, kV, 2, 8);
    f.insert(f.end(), {0xFF, 0xFF, 0x00, 0x00, 'a', 'b', 'c', 'd'});
    ASSERT_TRUE(c.send(f));
    EXPECT_TRUE(c.closed_by_server(10s)) << "inner length overflow";
  }
  {
    // Wait with a key count far above the limit.
    RawConn c(port);
    auto f = header(kMagic, kV, 5, 4);
    f.insert(f.end(), {0xFF, 0xFF, 0xFF, 0x7F});
    ASSERT_TRUE(c.send(f));
    EXPECT_TRUE(c.closed_by_server(10s)) << "key count";
  }
  {
    // Truncated frame: a set that announces 100 bytes, sends 10, then closes.
    RawConn c(port);
    auto f = header(kMagic, kV, 1, 100);
    f.resize(f.size() + 10, 'x');
    ASSERT_TRUE(c.send(f));
    c.shutdown_write();
    EXPECT_TRUE(c.closed_by_server(10s)) << "truncated";
  }
  {
    RawConn c(port);  // connect and hang up at once
  }

  // Existing and new clients still see intact data.
  EXPECT_EQ(store.get("keep/a", 1s), bytes("alpha"));
  EXPECT_EQ(store.add("keep/n", 1), 42);
  rb::TcpStore fresh(local(port), 5s);
  EXPECT_EQ(fresh.get("keep/a", 1s), bytes("alpha"));
  EXPECT_EQ(fresh.check({"keep/a", "keep/n", "x"}), (std::vector<bool>{true, true, false}));
}

TEST(TcpStore, PipelinedRequestsAreAllAnsweredInOrder) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  // Three SETs and a GET in one write, as a client that does not wait for replies would send.
  std::vector<uint8_t> burst;
  auto put_u32 = [](std::vector<uint8_t>& v, uint32_t x) {
    for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i)));
  };
  for (const char* k : {"p/1", "p/2", "p/3"}) {
    std::vector<uint8_t> body;
    put_u32(body, 3);
    body.insert(body.end(), k, k + 3);
    put_u32(body, 1);
    body.push_back(static_cast<uint8_t>(k[2]));
    auto f = header(kMagic, kV, 1, static_cast<uint32_t>(body.size()));
    f.insert(f.end(), body.begin(), body.end());
    burst.insert(burst.end(), f.begin(), f.end());
  }
  std::vector<uint8_t> get_body;
  put_u32(get_body, 3);
  get_body.insert(get_body.end(), {'p', '/', '2'});
  auto g = header(kMagic, kV, 2, static_cast<uint32_t>(get_body.size()));
  g.insert(g.end(), get_body.begin(), get_body.end());
  burst.insert(burst.end(), g.begin(), g.end());

  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(server.port());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_TRUE(raw_handshake(fd, "", rb::wire::kNoRank, 0, rb::wire::Role::Data));
  ASSERT_EQ(::send(fd, burst.data(), burst.size(), MSG_NOSIGNAL), static_cast<ssize_t>(burst.size()));
  // Three empty OK replies (12 bytes each) and one OK reply carrying "2".
  std::vector<uint8_t> want;
  for (int i = 0; i < 3; ++i) {
    auto h = header(kMagic, kV, 0, 0);
    want.insert(want.end(), h.begin(), h.end());
  }
  auto h = header(kMagic, kV, 0, 1);
  want.insert(want.end(), h.begin(), h.end());
  want.push_back('2');
  std::vector<uint8_t> got(want.size());
  size_t n = 0;
  while (n < got.size()) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1) << "replies stopped after " << n << " bytes";
    const ssize_t r = ::recv(fd, got.data() + n, got.size() - n, 0);
    ASSERT_GT(r, 0);
    n += static_cast<size_t>(r);
  }
  ::close(fd);
  EXPECT_EQ(got, want);
  rb::TcpStore store(local(server.port()), 5s);
  EXPECT_EQ(store.get("p/3", 1s), bytes("3"));
}

TEST(TcpStore, ManyConcurrentClients) {
  rb::TcpStoreServer server("127.0.0.1", 0);
  constexpr int kClients = 32;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      try {
        rb::TcpStore store(local(server.port()), 10s);
        for (int k = 0; k < kAdds; ++k) store.add("shared", 1);
        store.set("client/" + std::to_string(i), bytes(std::to_string(i)));
        std::vector<std::string> all;
        for (int j = 0; j < kClients; ++j) all.push_back("client/" + std::to_string(j));
        store.wait(all, 30s);
        const int peer = (i + 1) % kClients;
        if (store.get("client/" + std::to_string(peer), 1s) != bytes(std::to_string(peer))) ++failures;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "client " << i << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  rb::TcpStore store(local(server.port()), 5s);
  EXPECT_EQ(store.add("shared", 0), kClients * kAdds);
}

// ---------------------------------------------------------------------------------------------
// Bootstrap with ranks as threads.

TEST(Bootstrap, AllgatherBarrierSendRecv) {
  constexpr int n = 4;
  const auto root = local(free_port());
  auto errors = run_ranks(n, [&](int r) {
    rb::Bootstrap bs(r, n, root, 30s);
    ASSERT_EQ(bs.rank(), r);
    ASSERT_EQ(bs.nranks(), n);
    for (int round = 0; round < 3; ++round) {
      // Different sizes per rank and round, including empty contributions.
      const rb::Bytes mine(static_cast<size_t>(r * round), static_cast<uint8_t>(r + 10 * round));
      auto all = bs.allgather(mine);
      ASSERT_EQ(all.size(), static_cast<size_t>(n));
      for (int p = 0; p < n; ++p) {
        EXPECT_EQ(all[static_cast<size_t>(p)],
                  rb::Bytes(static_cast<size_t>(p * round), static_cast<uint8_t>(p + 10 * round)))
            << "rank " << r << " round " << round << " from " << p;
      }
      bs.barrier();
    }
    const int right = (r + 1) % n;
    const int left = (r + n - 1) % n;
    bs.send(right, "ring", bytes("from " + std::to_string(r)));
    EXPECT_EQ(bs.recv(left, "ring"), bytes("from " + std::to_string(left)));
    bs.barrier();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(Bootstrap, MissingRankIsNamedOnEveryArrivedRank) {
  const auto root = local(free_port());
  // Ranks 0, 1 and 3 of 4 start; rank 2 never does.
  auto errors = run_ranks(3, [&](int i) {
    const int r = i == 2 ? 3 : i;
    rb::Bootstrap bs(r, 4, root, 1500ms);
  });
  for (int i = 0; i < 3; ++i) {
    const std::string& msg = errors[static_cast<size_t>(i)];
    EXPECT_NE(msg.find("timed out after 1500 ms waiting for rank 2 of 4 (never arrived)"), std::string::npos) << msg;
    EXPECT_NE(msg.find(root.str()), std::string::npos) << msg;
  }
}

TEST(Bootstrap, BarrierTimeoutNamesTheRankThatNeverCame) {
  constexpr int n = 3;
  const auto root = local(free_port());
  auto errors = run_ranks(n, [&](int r) {
    rb::Bootstrap bs(r, n, root, 2s);
    if (r == 1) return;  // skips the barrier, then leaves
    try {
      bs.barrier();
    } catch (const rb::BootstrapError& e) {
      // As above: the other waiter may have timed out first and left unwinding.
      EXPECT_TRUE(e.kind() == Kind::Timeout || e.kind() == Kind::PeerFailed) << e.what();
      throw;
    }
  });
  EXPECT_EQ(errors[1], "");
  for (int r : {0, 2}) {
    const std::string& msg = errors[static_cast<size_t>(r)];
    EXPECT_NE(msg.find("rank " + std::to_string(r) + ": barrier"), std::string::npos) << msg;
    const bool timed_out = msg.find("waiting for rank 1 of 3") != std::string::npos;
    const bool saw_failure = msg.find("peer " + std::to_string(2 - r) + " failed") != std::string::npos;
    EXPECT_TRUE(timed_out || saw_failure) << msg;
  }
}

// The progressing barrier keeps calling its callback while it waits (a transport serving its
// peers), returns once all came, and names the rank that never came.
TEST(Bootstrap, ProgressingBarrierServesWhileWaitingAndNamesTheMissingRank) {
  constexpr int n = 3;
  const auto root = local(free_port());
  auto errors = run_ranks(n, [&](int r) {
    rb::Bootstrap bs(r, n, root, 5s);
    int calls = 0;
    if (r == 2) std::this_thread::sleep_for(200ms);  // late: the others must serve meanwhile
    bs.barrier(5s, [&] { ++calls; });
    if (r != 2 && calls == 0) throw std::runtime_error("rank " + std::to_string(r) + " never served while waiting");
    if (r == 1) return;  // skips the second barrier, then leaves
    try {
      bs.barrier(1s, [&] { ++calls; });
    } catch (const rb::BootstrapError& e) {
      // Whichever of ranks 0 and 2 times out first leaves unwinding (no goodbye); a rank still
      // waiting then learns that rank failed, unless it timed out itself just before.
      EXPECT_TRUE(e.kind() == Kind::Timeout || e.kind() == Kind::PeerFailed) << e.what();
      throw;
    }
  });
  EXPECT_EQ(errors[1], "");
  for (int r : {0, 2}) {
    const std::string& msg = errors[static_cast<size_t>(r)];
    EXPECT_NE(msg.find("rank " + std::to_string(r) + ": barrier"), std::string::npos) << msg;
    const bool timed_out = msg.find("waiting for rank 1 of 3") != std::string::npos;
    const bool saw_failure = msg.find("waiting for rank 1: peer " + std::to_string(2 - r) + " failed") != std::string::npos;
    EXPECT_TRUE(timed_out || saw_failure) << msg;
  }
}

TEST(Bootstrap, RecvTimeoutNamesThePeerAndTag) {
  const auto root = local(free_port());
  auto errors = run_ranks(2, [&](int r) {
    rb::Bootstrap bs(r, 2, root, 1s);
    if (r == 0) bs.recv(1, "hello");
  });
  EXPECT_NE(errors[0].find("recv from rank 1 tag 'hello'"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("never sent"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[1], "");
}

TEST(Bootstrap, RejectsRankOutsideJobAndSelfPeer) {
  const auto root = local(free_port());
  EXPECT_EQ(expect_error([&] { rb::Bootstrap bs(3, 3, root, 1s); }).kind(), Kind::Config);
  EXPECT_EQ(expect_error([&] { rb::Bootstrap bs(-1, 3, root, 1s); }).kind(), Kind::Config);
  rb::Bootstrap solo(0, 1, root, 5s);
  EXPECT_EQ(solo.allgather(bytes("x")), std::vector<rb::Bytes>{bytes("x")});
  solo.barrier();
  EXPECT_EQ(expect_error([&] { solo.send(0, "t", {}); }).kind(), Kind::Config);
}

TEST(Bootstrap, NoServerMeansConnectionErrorNamingRoot) {
  const auto root = local(free_port());
  auto e = expect_error([&] { rb::Bootstrap bs(1, 2, root, 300ms); });
  EXPECT_EQ(e.kind(), Kind::Connection);
  EXPECT_NE(std::string(e.what()).find("rank 1: bootstrap at " + root.str()), std::string::npos) << e.what();
}

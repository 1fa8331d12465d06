// UCX transport in one process: memory keys round-trip, and malformed key blobs are rejected by
// name instead of reaching ucp_ep_rkey_unpack.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace rb = rwin::bootstrap;
namespace rt = rwin::transport;

namespace {

struct OneRank {
  rb::Bootstrap bs{0, 1, rb::HostPort::parse("127.0.0.1:0"), std::chrono::milliseconds(10000)};
  std::unique_ptr<rt::Transport> tp;
  OneRank() {
    rt::TransportConfig cfg;
    cfg.name = "ucx";
    tp = rt::make_transport(cfg);
    tp->connect(bs);
  }
};

void expect_rejected(rt::Transport& tp, std::vector<uint8_t> blob, const char* why) {
  try {
    tp.unpack_key(0, blob);
    ADD_FAILURE() << "accepted a key blob with " << why;
  } catch (const rt::TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed memory key from rank 0"), std::string::npos) << e.what();
  }
}

TEST(UcxTransport, KeyRoundTripNamesBaseAndSize) {
  OneRank r;
  auto mr = r.tp->allocate(10000);
  ASSERT_NE(mr->addr(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mr->addr()) % 4096, 0u) << "window memory must be page aligned";
  const auto key = mr->packed_key();
  auto rkey = r.tp->unpack_key(0, key);
  EXPECT_EQ(rkey->base(), reinterpret_cast<uint64_t>(mr->addr()));
  EXPECT_EQ(rkey->bytes(), 10000u);
}

TEST(UcxTransport, MalformedKeysAreRejected) {
  OneRank r;
  auto mr = r.tp->allocate(4096);
  const auto good = mr->packed_key();
  expect_rejected(*r.tp, {}, "no bytes");
  expect_rejected(*r.tp, std::vector<uint8_t>(good.begin(), good.begin() + 31), "a truncated header");
  expect_rejected(*r.tp, std::vector<uint8_t>(good.begin(), good.end() - 1), "a truncated body");
  auto longer = good;
  longer.push_back(0);
  expect_rejected(*r.tp, longer, "trailing bytes");
  auto magic = good;
  magic[0] ^= 0xff;
  expect_rejected(*r.tp, magic, "a wrong magic");
  auto version = good;
  version[4] = 99;
  expect_rejected(*r.tp, version, "a wrong version");
}

TEST(UcxTransport, UnknownPeerAndUnknownTransportAreNamed) {
  OneRank r;
  auto mr = r.tp->allocate(4096);
  EXPECT_THROW(r.tp->unpack_key(3, mr->packed_key()), rt::TransportError);
  rt::TransportConfig cfg;
  cfg.name = "carrier-pigeon";
  try {
    rt::make_transport(cfg);
    ADD_FAILURE() << "unknown transport accepted";
  } catch (const rt::TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("'carrier-pigeon'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ucx"), std::string::npos) << e.what();
  }
}

TEST(UcxTransport, SelfWriteReadAndAtomicsComplete) {
  OneRank r;
  auto mr = r.tp->allocate(4096);
  auto rkey = r.tp->unpack_key(0, mr->packed_key());
  auto* mem = static_cast<uint64_t*>(mr->addr());
  mem[0] = 0x1122334455667788ull;
  std::vector<rt::Completion> done;
  auto run = [&](rt::Work w) {
    w.peer = 0;
    w.rkey = rkey.get();
    w.local_mr = mr.get();
    done.clear();
    ASSERT_EQ(r.tp->post(w), rt::PostResult::Ok);
    for (int i = 0; i < 100000 && done.empty(); ++i) r.tp->poll(done);
    ASSERT_EQ(done.size(), 1u) << "exactly one completion per accepted work";
    EXPECT_TRUE(done[0].ok) << done[0].error;
    EXPECT_EQ(done[0].cookie, w.cookie);
  };
  rt::Work write{rt::Op::Write, 0, &mem[0], nullptr, rkey->base() + 8, nullptr, 8, 0, 0, 11};
  run(write);
  EXPECT_EQ(mem[1], 0x1122334455667788ull);
  rt::Work fadd{rt::Op::FetchAdd, 0, &mem[2], nullptr, rkey->base() + 8, nullptr, 8, 1, 0, 12};
  run(fadd);
  EXPECT_EQ(mem[2], 0x1122334455667788ull);
  EXPECT_EQ(mem[1], 0x1122334455667789ull);
  rt::Work cas{rt::Op::CompareSwap, 0, &mem[3], nullptr, rkey->base() + 8, nullptr, 8, 7, 0x1122334455667789ull, 13};
  run(cas);
  EXPECT_EQ(mem[1], 7u);
  rt::Work flush{rt::Op::Flush, 0, nullptr, nullptr, 0, nullptr, 0, 0, 0, 14};
  run(flush);
}

}  // namespace

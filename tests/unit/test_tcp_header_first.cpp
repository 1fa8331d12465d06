// Big payloads are received once (transport/tcp/tcp_target.cpp, RxBuffer::header_first): after a
// write or a read reply of >= kHeaderFirstBytes, the next read asks for a header only, so the
// payload behind it is recv()ed straight into place instead of into the receive buffer and copied
// again. The data must land exactly as with any read size, small frames among the big ones included,
// on one connection per pair (requests and replies interleaved: the reply header is read first, a
// request's rest in the next round) and on one per direction (RWIN_TCP_DUPLEX=0).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "env_guard.h"
#include "tcp_pair.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace {

using namespace rwin_tcp_test;
using rwin::transport::tcp::RxBuffer;
using rwin::transport::tcp::TcpTransport;

constexpr size_t kHfPayload = 64 * 1024;
constexpr int kHfWrites = 12;

TcpTransport& hf_tcp(Pair& p, int rank) { return dynamic_cast<TcpTransport&>(*p.r[rank].t); }

// A pair with one connection (duplex, the default for two ranks) or one per direction.
class TcpHeaderFirst : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!GetParam()) env_.set("RWIN_TCP_DUPLEX", "0");
    pair_ = std::make_unique<Pair>();
    ASSERT_EQ(hf_tcp(*pair_, 0).connections_to(1), GetParam() ? 1 : 2);
  }
  rwin::test::EnvGuard env_;
  std::unique_ptr<Pair> pair_;
};

std::vector<char> hf_pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 13 + seed * 101 + 1);
  return v;
}

TEST_P(TcpHeaderFirst, BackToBackBigWritesLandOnceAndExactlyWithSmallOnesAmongThem) {
  Pair& p = *pair_;
  static_assert(kHfPayload >= RxBuffer::kHeaderFirstBytes && kHfWrites * kHfPayload + 64 <= Pair::kBytes);
  std::vector<std::vector<char>> src;
  for (int i = 0; i < kHfWrites; ++i) src.push_back(hf_pattern(kHfPayload, i));
  const uint64_t small = 0x1122334455667788ull;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kHfWrites; ++i) {
    tp::Work w = work(tp::Op::Write, src[static_cast<size_t>(i)].data(), p.at1(static_cast<size_t>(i) * kHfPayload), kHfPayload);
    ASSERT_EQ(p.post(w), tp::PostResult::Ok);
    ids.push_back(w.cookie);
    if (i == kHfWrites / 2) {  // a small write between two big ones takes the buffered path, still exactly
      tp::Work s = work(tp::Op::Write, const_cast<uint64_t*>(&small), p.at1(kHfWrites * kHfPayload), 8);
      ASSERT_EQ(p.post(s), tp::PostResult::Ok);
      ids.push_back(s.cookie);
    }
  }
  ASSERT_TRUE(p.wait_all(ids));
  ASSERT_TRUE(p.run(work(tp::Op::Flush, nullptr, 0, 0)).ok);
  for (int i = 0; i < kHfWrites; ++i) {
    EXPECT_EQ(std::memcmp(p.mem(1) + static_cast<size_t>(i) * kHfPayload, src[static_cast<size_t>(i)].data(), kHfPayload), 0)
        << "write " << i;
  }
  uint64_t got = 0;
  std::memcpy(&got, p.mem(1) + kHfWrites * kHfPayload, 8);
  EXPECT_EQ(got, small);
  // The first big write may sit in the buffer (read before its header was seen), and the one after
  // the small write; every other payload goes straight into the window. Read in 64 KiB gulps, as
  // before, nearly all of every payload was copied twice (~kHfWrites x kHfPayload).
  EXPECT_LE(hf_tcp(p, 1).rebuffered_bytes(), 2 * kHfPayload + 8)
      << "rank 1 copied payload bytes out of its receive buffer";
}

TEST_P(TcpHeaderFirst, PipelinedBigReadsLandOnceAndExactly) {
  Pair& p = *pair_;
  for (int i = 0; i < kHfWrites; ++i) {
    const std::vector<char> v = hf_pattern(kHfPayload, i + 50);
    std::memcpy(p.mem(1) + static_cast<size_t>(i) * kHfPayload, v.data(), kHfPayload);
  }
  std::vector<std::vector<char>> back(kHfWrites, std::vector<char>(kHfPayload));
  std::vector<uint64_t> ids;
  for (int i = 0; i < kHfWrites; ++i) {
    tp::Work w = work(tp::Op::Read, back[static_cast<size_t>(i)].data(), p.at1(static_cast<size_t>(i) * kHfPayload), kHfPayload);
    ASSERT_EQ(p.post(w), tp::PostResult::Ok);
    ids.push_back(w.cookie);
  }
  ASSERT_TRUE(p.wait_all(ids));
  for (int i = 0; i < kHfWrites; ++i) EXPECT_EQ(back[static_cast<size_t>(i)], hf_pattern(kHfPayload, i + 50)) << "read " << i;
  EXPECT_LE(hf_tcp(p, 0).rebuffered_bytes(), kHfPayload) << "rank 0 copied reply bytes out of its receive buffer";
}

INSTANTIATE_TEST_SUITE_P(Connections, TcpHeaderFirst, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "duplex" : "per_direction"; });

}  // namespace

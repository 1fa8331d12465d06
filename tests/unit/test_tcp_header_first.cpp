// Big payloads are received once (transport/tcp/tcp_target.cpp, RxBuffer::header_first): after a
// write or a read reply of >= kHeaderFirstBytes, the next read asks for a header only, so the
// payload behind it is recv()ed straight into place instead of into the receive buffer and copied
// again. The data must land exactly as with any read size, small frames among the big ones included,
// on one connection per pair (requests and replies interleaved: the next header is guessed to be of
// the last big frame's kind) and on one per direction (RWIN_TCP_DUPLEX=0). A big payload's last read
// takes the next header with it (read_with_tail): fewer reads, and frames cut anywhere around a
// payload's end still land exactly.
#include <gtest/gtest.h>
#include <sys/ioctl.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "env_guard.h"
#include "socket_util.h"
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

// ---- frames written by hand on a connection the transport adopted (its poll() serves it) --------

namespace w = rwin::transport::tcpw;

void put_frame(std::string& s, w::Req t, uint64_t addr, uint64_t len, uint64_t operand, const char* payload) {
  w::ReqHeader h;
  h.type = static_cast<uint8_t>(t);
  h.region = 1;  // the transport's first region
  h.addr = addr;
  h.len = len;
  h.operand = operand;
  s.append(reinterpret_cast<const char*>(&h), sizeof h);
  if (payload != nullptr) s.append(payload, len);
}

size_t queued(int fd) {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) == 0 ? static_cast<size_t>(n) : SIZE_MAX;
}

// Sends `bytes` without blocking (nothing reads them yet); false if they do not all go within 20 s.
bool send_all(int fd, const char* p, size_t n) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (n > 0 && std::chrono::steady_clock::now() < until) {
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    }
  }
  return n == 0;
}

class TcpAdoptedFrames : public ::testing::TestWithParam<bool> {
 protected:
  static constexpr size_t kWindow = 1 << 20;
  static constexpr uint64_t kCounter = 512 * 1024;  // an 8-byte counter the adds go to
  // Two big writes (0 and 64 KiB), an add of 1 to the counter, a 100-byte write at 200 KiB, and
  // an add of 2: what the tests below send.
  void SetUp() override {
    t_ = std::make_unique<TcpTransport>(unconnected_config());
    window_ = t_->allocate(kWindow);
    base_ = reinterpret_cast<uint64_t>(window_->addr());
    stream_.clear();
    for (int i = 0; i < 2; ++i) {
      src_[i] = hf_pattern(kHfPayload, i + 7);
      put_frame(stream_, w::Req::Write, base_ + static_cast<uint64_t>(i) * kHfPayload, kHfPayload, 0, src_[i].data());
    }
    put_frame(stream_, w::Req::AtomicAdd, base_ + kCounter, 8, 1, nullptr);
    small_ = hf_pattern(100, 3);
    put_frame(stream_, w::Req::Write, base_ + 200 * 1024, small_.size(), 0, small_.data());
    put_frame(stream_, w::Req::AtomicAdd, base_ + kCounter, 8, 2, nullptr);
  }
  void TearDown() override {
    if (theirs_ >= 0) ::close(theirs_);
    theirs_ = -1;
    if (t_) t_->quiesce(false);
  }
  void adopt(int rcvbuf = 0) {
    const auto [mine, theirs] = test_sock::connected_pair(rcvbuf);
    mine_ = mine;
    theirs_ = theirs;
    t_->adopt_in_connection_for_fuzzing(1, mine_, GetParam());
  }
  uint64_t counter() const { return __atomic_load_n(reinterpret_cast<const uint64_t*>(base_ + kCounter), __ATOMIC_ACQUIRE); }
  // Polls until the counter reads `want` or `mine_` holds nothing unread (want == 0); bounded: 20 s.
  bool poll_until(uint64_t want) {
    std::vector<rwin::transport::Completion> done;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      t_->poll(done);
      if (want > 0 ? counter() == want : queued(mine_) == 0) return true;
    }
    return false;
  }
  void expect_all_landed() {
    const char* mem = static_cast<const char*>(window_->addr());
    for (int i = 0; i < 2; ++i) EXPECT_EQ(std::memcmp(mem + static_cast<size_t>(i) * kHfPayload, src_[i].data(), kHfPayload), 0) << "write " << i;
    EXPECT_EQ(std::memcmp(mem + 200 * 1024, small_.data(), small_.size()), 0) << "the small write";
    EXPECT_EQ(counter(), 3u) << "each add applied once";
    EXPECT_EQ(t_->peer_error(1), "");
  }
  std::unique_ptr<TcpTransport> t_;
  std::unique_ptr<rwin::transport::MemoryRegion> window_;
  uint64_t base_ = 0;
  std::vector<char> src_[2], small_;
  std::string stream_;
  int mine_ = -1, theirs_ = -1;
};

// All the frames queued before the transport reads any: each big payload's last read also takes the
// header after it. Without that each big write cost a header read and a payload read, and on one
// connection per pair the header two (a reply's 24 bytes, then a request's other 16), the small
// frames after a big one too: 11 reads here on one connection per pair, 9 on one per direction.
TEST_P(TcpAdoptedFrames, ABigPayloadsLastReadTakesTheHeaderAfterIt) {
  adopt(1 << 20);  // room for all of it (capped by net.core.rmem_max, 208 KiB on Debian: enough)
  ASSERT_TRUE(send_all(theirs_, stream_.data(), stream_.size())) << "the frames did not fit in the sockets' buffers";
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (queued(mine_) != stream_.size() && std::chrono::steady_clock::now() < until) {
  }
  ASSERT_EQ(queued(mine_), stream_.size()) << "the frames are not all queued at the adopting end";
  ASSERT_TRUE(poll_until(3)) << "the adds did not land within 20 s";
  expect_all_landed();
  // One read takes the first header and most of the first payload (on one connection per direction
  // a peek of 8 KiB first, then those bytes read again for good), one the rest and the second
  // header, one the second payload and the add's header; then the small write's header, its
  // payload, and the last add (a short read: nothing more is asked of the empty socket).
  EXPECT_LE(t_->receive_calls(), GetParam() ? 6u : 7u);
}

// The frames cut in two around the first payload's end (the second part sent once the transport read
// the first): a payload's last read that takes none, part or all of the next header, or more, and the
// header's rest read on its own; every byte and every add lands exactly once.
TEST_P(TcpAdoptedFrames, FramesCutAnywhereAroundAPayloadsEndLandExactly) {
  const size_t end = sizeof(w::ReqHeader) + kHfPayload;  // where the first payload ends
  for (const int d : {-1, 0, 1, 16, 23, 24, 25, 39, 40, 41, 80}) {
    SCOPED_TRACE("cut at the first payload's end " + std::string(d < 0 ? "" : "+") + std::to_string(d));
    TearDown();
    SetUp();
    adopt();
    const size_t cut = end + static_cast<size_t>(static_cast<ptrdiff_t>(d));
    ASSERT_TRUE(send_all(theirs_, stream_.data(), cut));
    ASSERT_TRUE(poll_until(0)) << "the first part was not read within 20 s";
    ASSERT_TRUE(send_all(theirs_, stream_.data() + cut, stream_.size() - cut));
    ASSERT_TRUE(poll_until(3)) << "the adds did not land within 20 s (counter " << counter() << ")";
    expect_all_landed();
  }
}

INSTANTIATE_TEST_SUITE_P(Connections, TcpAdoptedFrames, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "duplex" : "per_direction"; });

INSTANTIATE_TEST_SUITE_P(Connections, TcpHeaderFirst, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "duplex" : "per_direction"; });

}  // namespace

// rwin's own tcp transport: the request stream an authenticated peer sends, through the real
// receive path (transport/tcp/tcp_target.cpp and tcp_lanes.cpp: framing, header checks, region lookup, writes landing
// in the window, put(Add)s handed to its adder, reads and atomics served, refusals), driven by poll()
// over a socketpair.
// Input: the raw byte stream. To let inputs reach the window, each request header the harness finds
// (walking the stream as a sender frames it) gets its region mapped into {0 = none, 1 = the window,
// 3 = never allocated} and its address into [base - 64 KiB, base + 2 x window): some in range, some
// not, some overflowing; a Fence's counts are taken mod 4, so some wait for lane writes that come.
// Region 2 exists but is never named. An input that starts with "RWLN" and a 4-byte length n carries
// n bytes for lane 1 (striping: a second connection of the same peer, whose writes a Fence on the
// first waits for), then the first connection's stream; lane 1 is connected (and closed once its
// bytes are sent) unless the input starts with "RWDX": then the connection is the pair's one duplex
// connection (tcp_wire.h), this rank posts a 64-byte Read and a fetch-add to the peer on it first,
// and the stream's frames whose type has kReplyBit are replies to them (or to nothing).
// Properties: no crash or sanitizer report; the stream always ends with the peer failed (the end of
// the stream is a closed connection) and a reason; region 2 is never written; the window's adder
// is only ever handed a range inside the window; each posted operation completes once at most, and
// nothing else completes.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "transport/tcp/tcp_transport_impl.h"
#include "transport/tcp/tcp_wire.h"

namespace rt = rwin::transport;
namespace w = rwin::transport::tcpw;

// transport.cpp's factory names the UCX and mixed transports, which this harness does not compile in.
namespace rwin::transport {
std::unique_ptr<Transport> make_ucx_transport(const TransportConfig&) { throw TransportError("not in this harness"); }
std::unique_ptr<Transport> make_mixed_transport(const TransportConfig&) { throw TransportError("not in this harness"); }
}  // namespace rwin::transport

namespace {
constexpr size_t kWindow = 64 * 1024;

// The window takes put(Add) (WriteAdd frames): bytes are added as u8 (type code 10), any other code
// is refused. The transport must only ever hand it a range inside the region it armed.
struct ByteAdder final : rt::RegionAdder {
  uint8_t* base;
  explicit ByteAdder(void* b) : base(static_cast<uint8_t*>(b)) {}
  std::string add(uint64_t code, uint64_t off, const char* src, uint64_t bytes) const noexcept override {
    FUZZ_CHECK(off <= kWindow && bytes <= kWindow - off);
    if (code != 10) return "type code " + std::to_string(code);
    for (uint64_t i = 0; i < bytes; ++i) base[off + i] = static_cast<uint8_t>(base[off + i] + static_cast<uint8_t>(src[i]));
    return {};
  }
};
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;
  rt::TransportConfig cfg;
  cfg.name = "tcp";
  cfg.rank = 0;
  cfg.nranks = 2;
  cfg.ifname = "lo";
  rt::tcp::TcpTransport t(cfg);
  auto window = t.allocate(kWindow);
  auto other = t.allocate(4096);
  t.accept_adds(*window, std::make_shared<ByteAdder>(window->addr()));
  const uint64_t base = reinterpret_cast<uint64_t>(window->addr());

  std::vector<uint8_t> stream(data, data + size), lane;
  const bool duplex = size >= 4 && std::memcmp(data, "RWDX", 4) == 0;
  if (duplex) {
    stream.assign(data + 4, data + size);
  } else if (size >= 8 && std::memcmp(data, "RWLN", 4) == 0) {
    uint32_t n;
    std::memcpy(&n, data + 4, 4);
    n = static_cast<uint32_t>(std::min<size_t>(n, size - 8));
    lane.assign(data + 8, data + 8 + n);
    stream.assign(data + 8 + n, data + size);
  }
  const auto map_headers = [&](std::vector<uint8_t>& bytes) {
    for (size_t at = 0; at + sizeof(w::ReqHeader) <= bytes.size();) {
      if (duplex && (bytes[at] & w::kReplyBit) != 0) {  // a reply: its body follows it
        w::RepHeader r;
        std::memcpy(&r, bytes.data() + at, sizeof r);
        at += sizeof r;
        if (r.len > bytes.size() - at) break;
        at += r.len;
        continue;
      }
      w::ReqHeader h;
      std::memcpy(&h, bytes.data() + at, sizeof h);
      if (h.type == static_cast<uint8_t>(w::Req::Fence)) {
        h.addr %= 4;
        h.operand %= 4;
        h.compare %= 4;
      } else {
        const uint32_t regions[] = {0, 1, 3};
        h.region = regions[h.region % 3];
        h.addr = base - 65536 + h.addr % (3 * kWindow + 65536);
      }
      std::memcpy(bytes.data() + at, &h, sizeof h);
      at += sizeof h;
      if (h.type == static_cast<uint8_t>(w::Req::Write) || h.type == static_cast<uint8_t>(w::Req::WriteAdd)) {
        if (h.len > bytes.size() - at) break;
        at += h.len;
      }
    }
  };
  map_headers(stream);
  map_headers(lane);

  int sv[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
  t.adopt_in_connection_for_fuzzing(1, sv[0], duplex);  // the transport's end; sv[1] is the peer's
  int lv[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, lv) == 0);
  if (!duplex) t.adopt_lane_for_testing(1, 1, lv[0]);
  else ::close(lv[0]);
  // Duplex: this rank's own requests, whose replies the stream may carry.
  char got[64] = {};
  uint64_t old = 0;
  std::unique_ptr<rt::RemoteKey> key;
  if (duplex) {
    w::PackedKey k;
    k.region = 7;
    k.base = 0x100000;
    k.bytes = 4096;
    std::vector<uint8_t> packed(sizeof k);
    std::memcpy(packed.data(), &k, sizeof k);
    key = t.unpack_key(1, packed);
    rt::Work rd{.op = rt::Op::Read, .peer = 1, .local = got, .remote_addr = k.base, .rkey = key.get(), .bytes = sizeof got, .cookie = 1};
    rt::Work fa{.op = rt::Op::FetchAdd, .peer = 1, .local = &old, .remote_addr = k.base + 8, .rkey = key.get(), .bytes = 8, .operand = 1, .cookie = 2};
    FUZZ_CHECK(t.post(rd) == rt::PostResult::Ok);
    FUZZ_CHECK(t.post(fa) == rt::PostResult::Ok);
  }
  int completions[3] = {};
  size_t sent = 0, lane_sent = 0;
  std::vector<rt::Completion> done;
  char sink[65536];
  bool closed = false, lane_closed = false;
  for (int round = 0; round < 100000 && t.peer_error(1).empty(); ++round) {
    if (lane_sent < lane.size()) {
      const ssize_t n = ::send(lv[1], lane.data() + lane_sent, lane.size() - lane_sent, MSG_NOSIGNAL);
      if (n > 0) lane_sent += static_cast<size_t>(n);
    } else if (!lane_closed) {
      ::shutdown(lv[1], SHUT_WR);  // a fence still waiting on it then fails the peer
      lane_closed = true;
    }
    if (sent < stream.size()) {
      const ssize_t n = ::send(sv[1], stream.data() + sent, stream.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
    } else if (!closed) {
      ::shutdown(sv[1], SHUT_WR);  // the end of the stream: the peer closes
      closed = true;
    }
    while (::recv(sv[1], sink, sizeof sink, 0) > 0) {
    }
    t.poll(done);
    for (const auto& c : done) {
      FUZZ_CHECK(duplex && (c.cookie == 1 || c.cookie == 2));  // nothing else was posted
      ++completions[c.cookie];
    }
    done.clear();
  }
  FUZZ_CHECK(!t.peer_error(1).empty());
  t.poll(done);  // what the failure completed
  for (const auto& c : done) {
    FUZZ_CHECK(duplex && (c.cookie == 1 || c.cookie == 2));
    ++completions[c.cookie];
  }
  FUZZ_CHECK(completions[1] <= 1 && completions[2] <= 1);
  const auto* o = static_cast<const uint8_t*>(other->addr());
  for (size_t i = 0; i < 4096; ++i) FUZZ_CHECK(o[i] == 0);
  ::close(sv[1]);
  ::close(lv[1]);
  if (duplex) t.quiesce(false);  // before `got` and `old` go: nothing lands in them after
  return 0;
}

// The tcp transport's wire format: the handshake that authenticates a connection, the request
// frames an initiator sends and the reply frames its target returns. Pure data and checks (no
// sockets), so the fuzzer and the unit tests drive exactly what the transport runs.
//
// Connections between two ranks of a job are duplex (RWIN_TCP_DUPLEX=1, the default): the lower rank
// dials the higher one, and that one socket carries both ranks' requests and the replies to them, so
// a message one way carries the TCP acknowledgement of the last one the other way (two sockets per
// pair cost a segment of its own per acknowledgement: bench/RESULTS.md). A reply frame's type has
// kReplyBit set there, which is how a reader tells it from a request. Each direction then has two
// writers (the caller thread's requests, the receive side's replies), which take turns whole frames
// at a time (TcpTransport::send_queue, send_replies). With RWIN_TCP_DUPLEX=0, and always for run-time
// peers (the agent) and a rank's connection to itself, connections are directional: rank A's requests
// to rank B travel on a socket A opened to B's listener ("A's out-connection", "B's in-connection");
// B's replies to them come back on the same socket, types without kReplyBit.
//
// Handshake (client = the initiator, server = the target's receiver thread):
//   client -> Hello     {magic, version, kind, src, dst, client_nonce[16]}          32 bytes
//   server -> Challenge {magic, version, status, server_nonce[16]}                  24 bytes
//   client -> Proof     {mac = HMAC(secret_dst, "rwin-tcp-client", transcript)}     32 bytes
//   server -> Accept    {magic, status, mac = HMAC(secret_dst, "rwin-tcp-server", transcript)} 40
// transcript = client_nonce | server_nonce | src | dst. secret_dst is 32 random bytes the target
// published through the (authenticated) bootstrap: only ranks of this job know it, so a stranger
// cannot prove it, and the client learns that the listener is the rank it meant (mutual). Before
// Accept nothing but these fixed-size messages is read; a connection that is not authenticated
// within kAuthDeadline is dropped.
//
// Striping (RWIN_TCP_SOCKETS = S > 1, a job's ranks only): each rank also opens S-1 lanes to every
// other rank (HelloKind::Lane). A lane carries Write frames only and nothing comes back on it; Writes
// of at least RWIN_TCP_STRIPE_MIN go round-robin over the first connection and the lanes. An atomic
// or Flush after Writes on the lanes is preceded on the first connection by a Fence naming how many
// Writes each lane carried so far, and the target applies nothing after the Fence until they all
// landed (a refused lane Write is answered with Refused on the first connection).
//
// Frames (host byte order: every rank of a job runs on the same architecture, as with verbs):
//   request  ReqHeader (40 bytes), then `len` payload bytes for a Write or WriteAdd
//   reply    RepHeader (24 bytes), then `len` bytes for ReadData, `len` bytes of text for Refused
// Requests are applied in the order they arrive on their socket, and replies leave in the same
// order, so an atomic or a Flush after Writes on one socket is applied after them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace rwin::transport::tcpw {

inline constexpr uint32_t kMagic = 0x50435452;  // "RTCP" read as little-endian bytes
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kNonce = 16;
inline constexpr size_t kMac = 32;
inline constexpr size_t kSecret = 32;

// Collective: src and dst are job ranks, the secret is dst's (published through the bootstrap).
// RunTime (an agent's peers, met at run time): dst is the index under which the server knows the
// client, src the client's index for the server; the secret is the one the server made for that
// peer alone and handed over in its endpoint (local_endpoint), which only the agent's
// token-authenticated control connection carried.
// Lane: an extra connection of a job's rank to another (RWIN_TCP_SOCKETS > 1), carrying only the
// Writes striped onto it; `kind` is Lane | index << 8, index 1..kMaxSockets-1 (0 is the connection of
// Collective kind, which carries everything else). Authenticated like the first.
enum class HelloKind : uint16_t { Collective = 1, RunTime = 2, Lane = 3 };
inline constexpr int kMaxSockets = 4;  // connections per ordered pair of ranks, the first included
inline uint16_t lane_kind(int lane) noexcept { return static_cast<uint16_t>(static_cast<uint16_t>(HelloKind::Lane) | lane << 8); }
// Which lane a (checked) hello opens: 0 for a Collective or RunTime hello.
inline int hello_lane(uint16_t kind) noexcept { return (kind & 0xff) == static_cast<uint16_t>(HelloKind::Lane) ? kind >> 8 : 0; }
enum class HandshakeStatus : uint16_t { Ok = 0, WrongVersion = 1, WrongRank = 2, Refused = 3 };

struct Hello {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t kind = static_cast<uint16_t>(HelloKind::Collective);
  int32_t src = -1;
  int32_t dst = -1;
  uint8_t nonce[kNonce] = {};
};
struct Challenge {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t status = 0;
  uint8_t nonce[kNonce] = {};
};
struct Proof {
  uint8_t mac[kMac] = {};
};
struct Accept {
  uint32_t magic = kMagic;
  uint32_t status = 0;
  uint8_t mac[kMac] = {};
};
static_assert(sizeof(Hello) == 32 && sizeof(Challenge) == 24 && sizeof(Proof) == 32 && sizeof(Accept) == 40);

// The bytes both sides MAC: client_nonce | server_nonce | src | dst.
struct Transcript {
  uint8_t bytes[2 * kNonce + 8] = {};
  Transcript(const uint8_t* client_nonce, const uint8_t* server_nonce, int32_t src, int32_t dst) {
    std::memcpy(bytes, client_nonce, kNonce);
    std::memcpy(bytes + kNonce, server_nonce, kNonce);
    std::memcpy(bytes + 2 * kNonce, &src, 4);
    std::memcpy(bytes + 2 * kNonce + 4, &dst, 4);
  }
};

// Why the server refuses a Hello (empty: acceptable). Collective: `me` is the server's rank,
// `nranks` the job's. RunTime (`run_time`): `nranks` is the number of peers the server has added,
// `me` unused.
std::string check_hello(const Hello& h, int me, int nranks, bool run_time = false);

// WriteAdd: put(Add) applied by the target (Op::Accumulate): `len` payload bytes added element-wise
// at `addr` by the region's adder; `operand` is the element type's code (the core's DType, opaque here).
// Fence (first connection only): nothing after it is applied until lanes 1, 2, 3 have landed `addr`,
// `operand`, `compare` Writes in all (the initiator's counts of Writes sent on each): an atomic or a
// Flush after striped Writes is applied after every stripe, as on one socket.
enum class Req : uint8_t {
  Write = 1, Read = 2, AtomicAdd = 3, FetchAdd = 4, CompareSwap = 5, Swap = 6, Flush = 7, Goodbye = 8, WriteAdd = 9,
  Fence = 10
};
enum class Rep : uint8_t { ReadData = 1, Value = 2, FlushAck = 3, Refused = 4 };
// On a duplex connection a reply's type byte carries this bit (a request's never does).
inline constexpr uint8_t kReplyBit = 0x80;

struct ReqHeader {
  uint8_t type = 0;
  uint8_t pad[3] = {};
  uint32_t region = 0;   // the target's region id (from its packed key)
  uint64_t addr = 0;     // absolute address in the target's region
  uint64_t len = 0;      // Write/Read: payload bytes; atomics: 8; Flush/Goodbye: 0
  uint64_t operand = 0;  // add value / swap value / CAS new value
  uint64_t compare = 0;  // CAS expected value
};
struct RepHeader {
  uint8_t type = 0;
  uint8_t status = 0;
  uint8_t pad[6] = {};
  uint64_t len = 0;    // ReadData: payload bytes; Refused: bytes of text
  uint64_t value = 0;  // Value: the old value of a fetching atomic
};
static_assert(sizeof(ReqHeader) == 40 && sizeof(RepHeader) == 24);

// Largest Write/Read one frame may carry, and the longest refusal text. A header beyond them is
// protocol garbage (the connection is dropped), not an out-of-bounds request.
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxRefusalBytes = 1024;
// Largest WriteAdd: the target holds the whole payload before it adds (TcpTransport::max_add_bytes).
inline constexpr uint64_t kMaxAddFrameBytes = uint64_t{1} << 20;

// Header-level checks of a request, before any region is looked up: a known type, zero padding,
// a length the type allows (Write/Read 1..kMaxFrameBytes, WriteAdd 1..kMaxAddFrameBytes with a type
// code below 256, atomics 8 and 8-byte aligned, Flush and Goodbye 0). Empty: well formed.
std::string check_request(const ReqHeader& h);
// The same for a reply.
std::string check_reply(const RepHeader& h);
// Whether [addr, addr + len) lies inside [base, base + bytes), without overflowing.
inline bool inside(uint64_t base, uint64_t bytes, uint64_t addr, uint64_t len) noexcept {
  return addr >= base && len <= bytes && addr - base <= bytes - len;
}
const char* req_name(uint8_t type) noexcept;

// The key a region's packed_key() carries: which region, where and how long.
struct PackedKey {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t pad = 0;
  uint32_t region = 0;
  uint32_t pad2 = 0;
  uint64_t base = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(PackedKey) == 32);

// What each rank publishes through the bootstrap in connect(), and what local_endpoint(p) returns
// for a run-time peer (then `rank` is p, the index under which the publisher knows the reader, and
// `secret` was made for that peer alone).
struct Endpoint {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t port = 0;     // host order
  int32_t rank = -1;
  uint32_t ipv4 = 0;     // network order
  uint8_t secret[kSecret] = {};
};
static_assert(sizeof(Endpoint) == 48);

// What a job's rank publishes in connect(): its endpoint, how many connections it opens to each
// other rank (RWIN_TCP_SOCKETS) and whether the first is duplex (RWIN_TCP_DUPLEX): every rank must
// say the same.
struct JobEndpoint {
  Endpoint e;
  uint32_t sockets = 1;
  uint32_t duplex = 0;
};
static_assert(sizeof(JobEndpoint) == 56);

}  // namespace rwin::transport::tcpw

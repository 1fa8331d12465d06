// The tcp transport's private class: rwin's own sockets where there is no RDMA NIC.
//
// Design (docs/TCP.md has the measurements behind it):
//  * One copy each way. A Write leaves the caller's buffer with sendmsg(header, payload) (the
//    kernel's copy) and the target recv()s the payload straight into the window (the other copy);
//    a Read is served from the window the same way. Writes of at most ~16 KiB (kInline) are copied into their
//    frame and leave with the op after them (a put and its notify: one sendmsg).
//  * Passive target. Each transport runs one receiver thread that sleeps in epoll_wait and applies
//    writes, reads, atomics, put(Add)s (through the core's RegionAdder) and flushes as they arrive, whether or not the owner is inside an rwin
//    call. It costs no CPU when idle (it blocks without a timeout). While the owner is inside rwin,
//    its poll() serves instead (rx_mu_; a hand-off to the thread costs 3x the latency).
//  * One connection per pair of ranks (RWIN_TCP_DUPLEX, tcp_wire.h): both ranks' requests and the
//    replies to them, so an answer carries the ACK of the message before it. Its two writers (the
//    caller's requests, the receive side's replies) take turns whole frames at a time (Peer::tx_mu).
//  * Ordered. Requests on one socket are applied in arrival order, one thread at a time, so an
//    atomic after writes lands after them (write_then_atomic_ordered) and a Flush's ack promises
//    every request before it.
//  * Authenticated. Every connection proves knowledge of its target's secret (tcp_wire.h), which
//    only the job's bootstrap carried; a stranger's bytes never reach a window.
//  * Run-time peers (the agent): add_peer/local_endpoint/connect_peer over the same listener, which
//    then stays open; each peer gets a secret of its own, carried in the endpoint blob over the
//    agent's token-authenticated control connection. wait_fd() is an eventfd the receiver thread
//    writes after serving anything while the owner is armed, so an agent sleeping in poll(2) wakes
//    for a peer's write into its signal word as for a reply of its own.
//  * Memory safety. The receive side touches window memory only while it holds the region table's
//    mutex and has found the region by id, so a region's destructor (which takes the mutex to erase it) is
//    the last moment any peer's bytes can land in it; a caller's buffer (Read destination,
//    fetched value) is touched only under its peer's mutex while the peer is healthy, so once
//    fail_peer() returned nothing lands there.
//
// Files: tcp_connect.cpp (construction, listener, the dialling side of the handshake, connect, quiesce),
//        tcp_initiator.cpp (post, poll, send queues, failures),
//        tcp_accept.cpp (the listening side of the handshake),
//        tcp_receiver.cpp (who serves: the receiver thread, or the owner's polls and sleeps),
//        tcp_target.cpp (the receive side: apply, reply, failure),
//        tcp_lanes.cpp (striping's receive side: lanes and the Fence),
//        tcp_duplex.cpp (one connection per pair: both kinds of frame on it, the half-sent request,
//        its socket out of the epoll set while the owner serves it).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/page_alloc.h"
#include "transport/tcp/tcp_congestion.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

namespace rwin::transport::tcp {

// What each descriptor in the epoll set is: the kind in the upper 32 bits of epoll_event.data.u64, a
// value (a peer's index, a pending fd, a lane's lane_value) in the lower.
enum Tag : uint64_t { kWake = 0, kListen = 1, kPending = 2, kIn = 3, kOut = 4, kLane = 5 };
inline uint64_t tag(Tag t, uint32_t v) noexcept { return uint64_t{t} << 32 | v; }
// A lane's tag value: its index above the peer's (lanes exist for a job's ranks only, < 2^24).
inline uint32_t lane_value(int p, int lane) noexcept { return static_cast<uint32_t>(lane) << 24 | static_cast<uint32_t>(p); }
inline std::string errno_text(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

// Regions peers may touch, by id. Shared by the transport and its regions, so a region may
// outlive the transport.
struct RegionTable {
  struct Entry {
    char* base = nullptr;
    size_t bytes = 0;
    std::shared_ptr<const RegionAdder> adder;  // set: it takes put(Add) (accept_adds)
  };
  std::mutex mu;
  std::map<uint32_t, Entry> live;
  uint32_t next_id = 1;  // ids are never reused
};

class TcpRegion final : public MemoryRegion {
 public:
  // Fresh zeroed pages exposed to peers.
  TcpRegion(std::shared_ptr<RegionTable> table, size_t bytes);
  // Caller memory: exposed (expose_memory) or local only (register_memory).
  TcpRegion(std::shared_ptr<RegionTable> table, void* addr, size_t bytes, bool exposed);
  ~TcpRegion() override;
  std::vector<uint8_t> packed_key() const override;
  uint32_t id() const noexcept { return id_; }  // 0: local only

 private:
  std::shared_ptr<RegionTable> table_;
  pages::PageBuffer buf_;
  uint32_t id_ = 0;  // 0: local only
};

class TcpKey final : public RemoteKey {
 public:
  TcpKey(uint32_t region, uint64_t base, size_t bytes) : region_(region) {
    base_ = base;
    bytes_ = bytes;
  }
  uint32_t region() const noexcept { return region_; }

 private:
  uint32_t region_;
};

// Bytes received but not yet parsed (up to kBytes per recv, so a small write and the notify after
// it cost one system call). Allocated at the first receive: a peer that never sends costs nothing.
struct RxBuffer {
  static constexpr size_t kBytes = 64 * 1024;
  // A payload of at least this many bytes is worth a system call of its own: after one, the next
  // read asks for a header only (header_first), so a following payload of its size is recv()ed
  // straight into place instead of into this buffer and copied again (in 64 KiB reads nearly all of
  // every payload took the second copy). Below it the extra recv() costs a blocking 16-32 KiB put
  // or get more than the copy it saves (bench/RESULTS.md, "Header first").
  static constexpr size_t kHeaderFirstBytes = 64 * 1024;
  std::unique_ptr<char[]> data;
  size_t begin = 0, end = 0;
  bool header_first = false;  // the last write or read reply taken had a payload >= kHeaderFirstBytes
  // That payload was a read reply's: a duplex connection's next header is guessed to be a reply's too
  // (header_bytes), as in a run of gets; after a write's, a request's.
  bool after_reply = false;
  size_t header_bytes() const noexcept { return after_reply ? sizeof(tcpw::RepHeader) : sizeof(tcpw::ReqHeader); }
  size_t size() const noexcept { return end - begin; }
  void compact() noexcept;
};

// An operation of mine whose reply is due, in request order.
struct Awaiting {
  Op op = Op::Flush;
  uint64_t cookie = 0;
  char* local = nullptr;  // Read destination / fetched value
  size_t bytes = 0;
};

// A request frame on its way out (caller thread only).
struct SendItem {
  // A Write this small is copied here and done at once, and leaves with the op after it (the notify):
  // one sendmsg instead of two. 16 KiB and a header (a collective's message): collectives of 8-64 KiB
  // 0.7-0.9x the time; 64 KiB was slower for streams of 32-64 KiB puts (the copy; bench/RESULTS.md,
  // "Writes of up to 16 KiB ride with the notify").
  static constexpr size_t kInline = 16 * 1024 + 64;
  static constexpr size_t kMaxHeld = 16;   // inline Writes held for the op after them, at most
  tcpw::ReqHeader hdr;
  const char* payload = nullptr;  // Write source (the caller's buffer, or inline_data)
  std::unique_ptr<char[]> inline_data;
  size_t sent = 0;                // bytes of header + payload already written
  uint64_t cookie = 0;
  bool complete_when_sent = false;  // Write, AtomicAdd: the Completion is due once written
  size_t total() const noexcept { return sizeof hdr + (payload ? hdr.len : 0); }
};

// A reply frame on its way out (the receive side only, under rx_mu_).
struct ReplyItem {
  tcpw::RepHeader hdr;
  uint32_t region = 0;     // ReadData: served from this region at `addr`
  uint64_t addr = 0;
  std::string text;        // Refused: the reason
  size_t sent = 0;
  size_t total() const noexcept { return sizeof hdr + hdr.len; }
};

// Frames (SendItem, ReplyItem) leave in batches, one sendmsg each. add_unsent appends what is left of
// frame `f` to iov: its header from f.sent on, then its body, whose first byte is at `body` (null: no
// body); it returns the new count. consume_sent marks `w` sent bytes against the queue, front first,
// and calls whole(frame) for each frame sent whole before dropping it.
template <class Frame>
int add_unsent(iovec* iov, int n, Frame& f, const char* body) noexcept {
  size_t off = f.sent;
  if (off < sizeof f.hdr) {
    iov[n++] = {reinterpret_cast<char*>(&f.hdr) + off, sizeof f.hdr - off};
    off = sizeof f.hdr;
  }
  if (body) iov[n++] = {const_cast<char*>(body) + (off - sizeof f.hdr), f.total() - off};
  return n;
}
template <class Queue, class Whole>
void consume_sent(Queue& q, size_t w, Whole&& whole) {
  while (w > 0 && !q.empty()) {
    auto& f = q.front();
    const size_t take = std::min(w, f.total() - f.sent);
    f.sent += take;
    w -= take;
    if (f.sent < f.total()) return;
    whole(f);
    q.pop_front();
  }
}

// Everything about one peer.
struct Peer {
  int out_fd = -1;  // my requests, its replies
  int in_fd = -1;   // its requests, my replies (a duplex connection: the same socket as out_fd)
  std::string where;  // "127.0.0.1:41234"
  uint8_t secret[tcpw::kSecret] = {};  // run-time peers: what its connection must prove (made for it alone)

  // Shared between the caller thread and the receive side.
  std::mutex mu;
  std::deque<Awaiting> awaiting;  // my requests whose reply is due
  std::atomic<size_t> awaiting_n{0};  // its size, read without the mutex for Busy
  std::string error;              // sticky; empty while healthy
  std::atomic<bool> failed{false};
  bool said_goodbye = false;      // it sent Goodbye: its close is the end of its job

  // Caller thread only.
  std::deque<SendItem> sendq;
  bool listed = false;  // in TcpTransport::active_ (sendq not empty)
  size_t held = 0;      // inline Writes at the tail of sendq that wait for the op after them
  // Frames that should leave now: anything in sendq beyond the held Writes (a held Write goes with the
  // op after it or once kMaxHeld wait).
  bool sendable() const { return sendq.size() > held || lanes_queued() > 0; }

  // A duplex connection's two writers (the caller thread's requests, the receive side's replies) take
  // turns under tx_mu, whole frames at a time: a frame one of them left half sent (the socket was full)
  // is finished before the other writes. The receive side finishes a request the caller left half sent
  // itself (tx_req: sendq's front, which only this mutex's holders touch while it is set), so a caller
  // away from rwin does not hold up its replies; the caller completes and drops it at its next send.
  enum class Half : uint8_t { None, Request, Reply };
  std::mutex tx_mu;
  Half tx_half = Half::None;
  SendItem* tx_req = nullptr;  // Half::Request: the request frame left half sent

  // Receive side only (under TcpTransport::rx_mu_).
  RxBuffer out_rx;           // replies (a duplex connection: unused, both kinds arrive in in_rx)
  RxBuffer in_rx;            // requests
  // Payload still to land for the frame being received on each socket.
  struct Landing {
    uint64_t left = 0;
    uint32_t region = 0;     // in: a Write into this region (0: discard)
    uint64_t addr = 0;
    char* local = nullptr;   // out: a Read's destination
    tcpw::RepHeader refused; // out: a Refused reply's text collects here
    std::string text;
    // in: a WriteAdd (put(Add) the target applies): its payload collects in Peer::add_buf, then the
    // region's adder adds it at `addr` (region 0: refused, the payload is discarded).
    bool add = false;
    uint64_t dtype = 0;
    uint64_t total = 0;
  };
  Landing in_land, out_land;
  std::unique_ptr<char[]> add_buf;  // receive side: a WriteAdd's payload (allocated at the first one)
  size_t add_cap = 0;
  // Bytes of in_fd read with MSG_PEEK into in_rx and still in the kernel's buffer (TcpTransport::pump):
  // read for good (unpeek) before anything else is read from in_fd.
  size_t in_peeked = 0;
  bool in_streaming = false;  // in_fd's last read filled what it asked for (more is likely waiting)
  bool in_answered = false;   // the requests it read last asked for replies (they carry the ACK)
  // in_fd has carried bytes: the owner's polls recv() it directly (serve_direct); until then only
  // its epoll rounds look at it, so connections that stay idle (an agent peer's connection back)
  // do not push the owner off its direct polls.
  bool in_heard = false;
  std::deque<ReplyItem> replies;
  bool want_out = false;     // EPOLLOUT armed on in_fd
  bool parked = false;       // in_fd is out of the epoll set while the owner serves it (park_sockets)

  // Striping (RWIN_TCP_SOCKETS = S > 1, tcp_wire.h): lanes 1..S-1 to and from this peer, at index
  // lane - 1. Caller thread: the Writes striped onto my lanes to it.
  struct LaneOut {
    int fd = -1;
    std::deque<SendItem> sendq;  // Writes only
    uint64_t writes = 0;         // Writes posted on it so far (a Fence names these counts)
  };
  LaneOut lane_out[tcpw::kMaxSockets - 1];
  int nlanes = 0;            // lanes open to it (S - 1 once connected)
  uint64_t next_lane = 1;    // round-robin over 0 (the first connection) .. nlanes
  bool unfenced = false;     // a Write went on a lane since the last Fence
  // Receive side: its lanes to me. A lane's frame is read header first (no buffer: the payload is
  // recv()ed straight into the window).
  struct LaneIn {
    int fd = -1;
    bool closed = false;       // closed by the peer between two frames (its goodbye, or its death)
    tcpw::ReqHeader hdr;
    size_t got = 0;            // bytes of hdr read
    Landing land;
    uint64_t landed = 0;       // Writes landed whole (or refused and discarded)
  };
  LaneIn lane_in[tcpw::kMaxSockets - 1];
  bool has_lanes_in = false;   // any lane of it connected (the owner's direct reads do not see lanes)
  uint64_t fence[tcpw::kMaxSockets - 1] = {};  // the last Fence's counts
  bool fenced = false;         // its requests wait at a Fence until the lanes landed fence[]
  size_t lanes_queued() const noexcept {
    size_t n = 0;
    for (int k = 0; k < nlanes; ++k) n += lane_out[k].sendq.size();
    return n;
  }
};

// A connection accepted but not yet authenticated (receive side, under rx_mu_).
struct Pending {
  int fd = -1;
  std::chrono::steady_clock::time_point deadline;
  tcpw::Hello hello;
  tcpw::Challenge challenge;
  tcpw::Proof proof;
  size_t got = 0;  // bytes of the message being read
  bool have_hello = false;
  std::string from;  // "127.0.0.1:5678"
};

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(const TransportConfig& cfg);
  ~TcpTransport() override;

  std::string describe() const override;
  Capabilities capabilities() const override;
  void connect(bootstrap::Bootstrap& bs) override;
  std::unique_ptr<MemoryRegion> allocate(size_t bytes) override;
  std::unique_ptr<MemoryRegion> register_memory(void* addr, size_t bytes) override;
  std::unique_ptr<RemoteKey> unpack_key(int peer, std::span<const uint8_t> packed) override;
  PostResult post(const Work& w) override;
  void poll(std::vector<Completion>& out) override;
  // Every arrival is served under rx_mu_ (the receiver thread's or the owner's poll()): taking it
  // once orders all that were served before.
  void sync_arrivals() noexcept override { std::lock_guard<std::mutex> g(rx_mu_); }
  std::string peer_error(int peer) const override;
  std::string rma_mode(int peer) const override;
  void* mapped(int peer, const RemoteKey& key, uint64_t remote_addr, size_t bytes) const noexcept override;
  void fail_peer(int peer, const std::string& why) noexcept override;
  void quiesce(bool graceful) noexcept override;
  bool serves_passively() const noexcept override { return true; }
  int add_peer() override;
  std::vector<uint8_t> local_endpoint(int peer) override;
  void connect_peer(int peer, std::span<const uint8_t> remote_endpoint) override;
  std::unique_ptr<MemoryRegion> expose_memory(void* addr, size_t bytes) override;
  void accept_adds(MemoryRegion& region, std::shared_ptr<const RegionAdder> adder) override;
  int wait_fd() const noexcept override { return notify_fd_; }
  bool arm() noexcept override;
  void owner_away() noexcept override;
  bool idle_wait(std::chrono::microseconds max) noexcept override;
  uint64_t arrivals() const noexcept override { return received_.load(std::memory_order_relaxed); }
  // More ranks than CPUs here: a rank waiting inside rwin is often descheduled for longer than
  // kOwnerWindow between two polls (the ranks sharing its core run meanwhile), so its receiver thread
  // took such a gap for an absence and was woken for every later arrival, two context switches on a
  // busy core per message. There it counts the owner away after kOversubscribedOwnerWindow instead.
  // Measured at 4 and 8 ranks on 2 cores over loopback, owner serving: barrier 117-122 -> 85 us and
  // 727 -> 384 us, 8 B allreduce 129-134 -> 100 us and 828 -> 460 us (only the receiver thread
  // serving: 158 and 407-475 us barrier); a rank that left rwin is then served up to 2 ms later.
  // Oversubscribed, the receiver thread also sleeps at once after serving (no spin window): a
  // spinning thread would take the core from a rank that shares it.
  void set_oversubscribed(bool yes) noexcept override {
    owner_window_ns_.store((yes ? kOversubscribedOwnerWindow : kOwnerWindow).count(), std::memory_order_relaxed);
  }
  bool oversubscribed() const noexcept {
    return owner_window_ns_.load(std::memory_order_relaxed) == kOversubscribedOwnerWindow.count();
  }
  // Tests: the congestion control of the connection that carries this rank's requests to peer p.
  std::string congestion_of(int p) const {
    const Peer& P = *peers_[static_cast<size_t>(p)];
    return socket_congestion(P.out_fd >= 0 ? P.out_fd : P.in_fd);
  }
  // Tests: whether the owner serves from its polls, and how long a gap in them counts as an absence.
  bool owner_serves() const noexcept { return owner_serves_.load(std::memory_order_relaxed); }
  std::chrono::nanoseconds owner_window() const noexcept {
    return std::chrono::nanoseconds(owner_window_ns_.load(std::memory_order_relaxed));
  }
  // How often the receiver thread woke (a nap ended or epoll_wait returned): tests check that an
  // idle rank's thread does not wake at all.
  uint64_t receiver_wakes() const noexcept { return receiver_wakes_.load(std::memory_order_relaxed); }
  // Whether the receiver thread naps (or is about to) while its owner serves: tests.
  bool receiver_napping() const noexcept { return napping_.load(std::memory_order_relaxed); }
  // Rounds the receiver thread polled in its spin window after serving (receiver_spin_ns_): tests
  // check that it spins after serving a passive target and stops when the window ends.
  uint64_t receiver_spins() const noexcept { return receiver_spins_.load(std::memory_order_relaxed); }
  // Rounds in which the receiver thread served something (tests: who serves while the owner polls).
  uint64_t receiver_served() const noexcept { return served_.load(std::memory_order_relaxed); }
  // Tests: how many peers' sockets are parked now (out of the epoll set while the owner serves).
  int parked_for_testing() {
    std::lock_guard<std::mutex> g(rx_mu_);
    return parked_;
  }
  // Reads of requests that peeked (pump): tests check that the peek path ran.
  uint64_t peeks() const noexcept { return peeks_.load(std::memory_order_relaxed); }
  // Payload bytes of writes and reads copied out of a receive buffer (the rest went straight into
  // place): tests check that big payloads skip the second copy (RxBuffer::header_first).
  uint64_t rebuffered_bytes() {
    std::lock_guard<std::mutex> g(rx_mu_);
    return rebuffered_;
  }
  // recv() and recvmsg() calls on its data connections, EAGAIN ones included: tests check that a big
  // payload's last read takes the next header with it (read_with_tail).
  uint64_t receive_calls() {
    std::lock_guard<std::mutex> g(rx_mu_);
    return recv_calls_;
  }
  // For the frame fuzzer (tests/fuzz/tcp_frames_fuzz.cpp): serves `in_fd` as the authenticated
  // in-connection of `peer` in a transport that never connect()ed: no bootstrap, listener or
  // receiver thread, so poll() serves it. The transport owns and closes `in_fd`. duplex: it is the
  // pair's one connection (tcp_wire.h: replies to this rank's requests may come on it too, its own
  // replies carry kReplyBit, and post() sends on it); else a directional in-connection.
  void adopt_in_connection_for_fuzzing(int peer, int in_fd, bool duplex = false);
  // The same for lane `lane` (1..kMaxSockets-1) of that peer (tests of striping's fence).
  void adopt_lane_for_testing(int peer, int lane, int fd);

  // Striping (tests): Writes posted on lanes, Fences sent, connections per pair.
  uint64_t lane_writes() const noexcept { return lane_writes_; }
  uint64_t fences_sent() const noexcept { return fences_; }
  int sockets() const noexcept { return sockets_; }
  // Tests: while the returned lock is held, this rank's receive side serves nothing (neither its
  // receiver thread nor its owner's poll), so what peers send stays in the sockets.
  std::unique_lock<std::mutex> hold_receive_side_for_testing() { return std::unique_lock<std::mutex>(rx_mu_); }
  // Tests: the sockets this rank holds to peer p (a duplex pair's one, or one per direction and lanes).
  int connections_to(int p) const noexcept {
    const Peer& P = *peers_[static_cast<size_t>(p)];
    int n = (P.out_fd >= 0) + (P.in_fd >= 0 && P.in_fd != P.out_fd);
    for (int k = 0; k < tcpw::kMaxSockets - 1; ++k) n += (P.lane_out[k].fd >= 0) + (P.lane_in[k].fd >= 0);
    return n;
  }
  // rwin-perf --counters, ctx.stats(): the lanes' Writes as `striped` (the rest are verbs' counters).
  TransportCounters counters() const override {
    TransportCounters c;
    c.striped = lane_writes_;
    return c;
  }

  static constexpr std::chrono::seconds kAuthDeadline{5};
  static constexpr size_t kMaxPending = 256;      // unauthenticated connections kept at once
  static constexpr size_t kMaxInFlight = 4096;    // per peer: queued + awaiting a reply
  static constexpr int kMaxRunTimePeers = 16384;  // peers_ slots of a transport with run-time peers

  // The receive side (tcp_receiver.cpp, tcp_target.cpp, tcp_accept.cpp, tcp_lanes.cpp): the receiver thread, or the
  // owner's poll(), under rx_mu_.
 private:
  void receiver_main() noexcept;
  int serve() noexcept;        // handles what is ready now (how many events); rx_mu_ held
  // The owner's poll() and the receiver thread's spin: recv()s the few sockets that can hold
  // something directly, else (and every kEpollEvery-th of `rounds`) serve(); true: it served something.
  bool serve_direct(uint32_t& rounds) noexcept;
  // Parking (RWIN_TCP_PARK): a socket in an epoll set makes every arrival run epoll's callback in
  // the sender's softirq, waited on or not (~0.12-0.17 us a message on loopback, bench/RESULTS.md
  // "Where the rest of the 8 B gap goes"). While the owner serves its duplex sockets itself (it
  // recv()s them directly, serve_direct) the receiver thread takes them out of the set as it naps, and
  // puts them back before it serves again; serve() reads parked sockets directly, idle_wait sleeps
  // on them beside the set, and a socket that needs EPOLLOUT or a fence goes back at once. rx_mu_ held.
  void park_sockets();
  void unpark_sockets();
  void unpark(int p);
  void on_accept();
  void on_pending(size_t idx);
  void finish_handshake(Pending& pc);
  void drop_pending(size_t idx, const std::string& why);
  void on_in(int p);
  void on_in_writable(int p);
  void on_out(int p);
  bool pump(int p, bool requests);  // reads a socket of p's: its requests, or its replies
  // Reads for good what an earlier pump() peeked from p's in_fd (false: the peer failed).
  bool unpeek(int p);
  bool take_requests(int p);   // parses in_rx; false: the peer failed
  // What in_rx holds, whatever its kind: take_requests, or on a duplex connection requests and replies
  // as they come.
  bool take_in(int p);
  RxBuffer& replies_rx(int p) noexcept {  // where the replies to this rank's requests collect
    Peer& P = *peers_[static_cast<size_t>(p)];
    return duplex(p) ? P.in_rx : P.out_rx;
  }
  // Whether in_rx's next frame is a reply (a duplex connection's kReplyBit); false with nothing buffered.
  bool next_is_reply(int p) const noexcept;
  bool land_write(int p);      // recv()s payload straight into the window (a WriteAdd's into add_buf)
  void apply_add(int p);       // a WriteAdd's payload is all in add_buf: the region's adder adds it
  bool take_replies(int p);
  bool land_read(int p);
  // The reply to P.awaiting's front request is all here: it leaves awaiting and completes. `g` holds
  // P.mu and is released before the completion queue's mutex is taken.
  void complete_front(Peer& P, std::unique_lock<std::mutex>& g);
  bool send_replies(int p);    // false: the peer failed
  // A duplex connection: sends the rest of the request the caller left half sent (tx_mu held). 1: it
  // is out (or there was none), 0: the socket is full, -1: the peer failed.
  int finish_half_request(int p);
  void apply_atomic(int p, const tcpw::ReqHeader& h);
  void refuse(int p, const std::string& why);
  void set_epoll_out(int p, bool on);
  void update_in_events(int p);  // in_fd's epoll events: EPOLLIN unless fenced, EPOLLOUT if want_out
  // A lane of p's (striping): reads its Write frames and lands them; lifts a Fence they complete.
  void on_lane(int p, int lane);
  bool land_lane(int p, int lane);  // false: the peer failed
  // recv()s up to `want` bytes of a write's payload (landing L) from `fd`, p's first connection
  // (lane 0) or one of its lanes, into `dst`. 1: some arrived (L advanced), 0: the socket is dry,
  // -1: p failed (a close inside the payload, or an error; named with the lane). With `next` (an
  // empty receive buffer; `want` is all the payload left) the same call also reads the header that
  // follows into it (read_with_tail).
  int recv_payload(int p, int fd, Peer::Landing& L, char* dst, size_t want, int lane, RxBuffer* next = nullptr);
  // One recvmsg() for the last `want` bytes of a big payload into `dst` and, into the empty buffer
  // `rx`, the header that follows (RxBuffer::header_first: without it, a header read and a payload
  // read per frame, three on a duplex connection). It asks for a header of the kind of that payload's
  // frame (RxBuffer::header_bytes); on a duplex connection a guess: when the other kind comes, a
  // reply's first 16 payload bytes are copied out of the buffer, or a request's last 16 header bytes
  // take a read of their own. Returns what recvmsg() returns; the bytes past `want` are added to rx
  // (rx.end), and a short read sets rx_dry_ (the socket is empty now).
  ssize_t read_with_tail(int fd, char* dst, size_t want, RxBuffer& rx);
  // Where the next bytes of Write landing L go, and how many (`want`): the window, with `g` (on the
  // region table's mutex) locked so the region outlives the recv, or the discard buffer for a refused
  // write or one whose region was freed meanwhile (L.region becomes 0).
  char* write_dst(Peer::Landing& L, size_t& want, std::unique_lock<std::mutex>& g);
  // Whether every lane landed what p's Fence names (false: not yet, or p failed: a lane closed short).
  bool fence_passed(int p);
  // Why the target refuses request `h` of p's (empty: its range lies in an exposed region).
  std::string check_target(const tcpw::ReqHeader& h);
  // Marks `p` failed (first reason wins), fails its awaiting work, shuts its sockets down.
  void fail(int p, const std::string& why) noexcept;

  // Caller-thread side (tcp_initiator.cpp).
  bool flush_sends(int p);     // false: the peer failed
  // Sends what it can of queue `q` on `fd` (p's first connection, or lane `lane`); false: p failed.
  bool send_queue(int p, int fd, std::deque<SendItem>& q, int lane);
  void fail_queued(int p);

  std::string who(int p) const;  // "tcp: rank 0 -> peer 1 (127.0.0.1:4242)"
  void wake() noexcept;
  // The peers that exist now: every rank of a job, or the run-time peers added so far. A slot
  // below it is set for good (add_peer fills it before publishing the count).
  int peer_count() const noexcept { return npeers_.load(std::memory_order_acquire); }
  // Listener, epoll set, wake-up eventfd and receiver thread (connect(); construction with run-time peers).
  void start_listening();
  // Opens p's out-connection to `e` and authenticates it both ways (tcp_wire.h); throws TransportError.
  // lane > 0: one of the lanes of a job's rank (striping), which carries writes only.
  void dial(int p, const tcpw::Endpoint& e, const uint8_t* key, tcpw::HelloKind kind, int32_t src, int32_t dst,
            std::chrono::steady_clock::time_point deadline, int lane = 0);
  // The receiver thread served something: wakes an armed owner (wait_fd).
  void notify_owner() noexcept;

  int rank_ = 0, nranks_ = 0;
  bool run_time_ = false;  // peers are added at run time (TransportConfig::dynamic_peers)
  // Connections to each other rank of a job (RWIN_TCP_SOCKETS, the same on every rank; run-time
  // peers: 1) and the smallest Write striped over them (RWIN_TCP_STRIPE_MIN).
  int sockets_ = 1;
  uint64_t stripe_min_ = 64 * 1024;
  // One connection per pair of ranks carrying both ways (RWIN_TCP_DUPLEX, tcp_wire.h); never to itself,
  // never to run-time peers. The lower rank of a duplex pair dials it.
  // A striped pair keeps one connection per direction: a Fence waiting for a lane holds up what comes
  // after it on the first connection, which must not be the replies to this rank's own requests.
  bool duplex_ = true;
  bool duplex(int p) const noexcept { return duplex_ && !run_time_ && p != rank_ && !lanes_to(p); }
  // Which peers get lanes: every other rank, or under mixed only those on other hosts (the same answer
  // on both ends of a pair, as host_of is the same on every rank).
  std::vector<int> host_of_;
  bool lanes_across_hosts_only_ = false;
  bool lanes_to(int p) const noexcept {
    if (sockets_ <= 1 || p == rank_) return false;
    if (!lanes_across_hosts_only_ || host_of_.size() != static_cast<size_t>(nranks_)) return true;
    return host_of_[static_cast<size_t>(p)] != host_of_[static_cast<size_t>(rank_)];
  }
  uint64_t lane_writes_ = 0, fences_ = 0;  // caller thread  // peers are added at run time (TransportConfig::dynamic_peers)
  std::atomic<int> npeers_{0};
  std::string ifname_;
  std::string bind_addr_;
  uint16_t port_ = 0;
  uint32_t ipv4_ = 0;  // the listener's address, network order
  uint8_t secret_[tcpw::kSecret] = {};
  // Fixed slots (nranks, or kMaxRunTimePeers), so the receiver thread reads a slot while the
  // owner fills a later one: the vector itself never changes after construction.
  std::vector<std::unique_ptr<Peer>> peers_;
  std::shared_ptr<RegionTable> regions_ = std::make_shared<RegionTable>();

  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop, close the listener
  int notify_fd_ = -1;  // eventfd: wait_fd() (run-time peers only; -1 in a job)
  int nap_fd_ = -1;     // eventfd: ends the receiver thread's nap (arm(), owner_away())
  std::atomic<bool> napping_{false};  // the receiver thread naps (or is about to)
  std::atomic<bool> armed_{false};           // the owner sleeps on notify_fd_
  std::atomic<uint64_t> served_{0};          // rounds the receiver thread served
  uint64_t served_at_poll_ = 0;              // served_ when the owner's last poll() began
  std::thread receiver_;
  // Guards everything the receive side touches (pending_, each Peer's receiver-side state): held
  // by the receiver thread while it serves, and taken with try_lock by the owner's poll(), which
  // then serves itself (RWIN_TCP_OWNER_SERVES, default on): a rank
  // waiting inside rwin handles its own arrivals without waking its receiver thread first.
  std::mutex rx_mu_;
  std::atomic<bool> owner_serves_{true};  // read by the receiver thread
  std::atomic<int64_t> owner_seen_ns_{0};  // the owner's last poll (steady clock)
  bool owner_serving_ = false;  // under rx_mu_: the owner's poll() serves now, not the receiver thread
  bool park_ = true;            // RWIN_TCP_PARK
  std::string congestion_;      // every data connection's (RWIN_TCP_CONGESTION; "": the kernel's)
  int parked_ = 0;              // under rx_mu_: peers whose in_fd is parked
  // serve_direct(): with at most kDirectSockets sockets that can hold something for the owner (each
  // peer's requests, the replies it awaits) among at most kDirectPeers peers, it recv()s them instead
  // of asking epoll first; every kEpollEvery-th round serve() looks at the whole set.
  static constexpr int kDirectSockets = 2;
  static constexpr int kDirectPeers = 8;
  static constexpr uint32_t kEpollEvery = 16;
  uint32_t owner_rounds_ = 0;   // caller thread: serve_direct's rounds
  bool served_last_ = false;    // caller thread: the last poll() served
  std::atomic<uint64_t> received_{0};  // recv() calls that returned bytes (arrivals())
  // Counts one; rx_mu_ held, so there is one writer at a time and no read-modify-write is needed.
  void count_arrival() noexcept { received_.store(received_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  static constexpr std::chrono::nanoseconds kOwnerWindow{200000};
  static constexpr std::chrono::nanoseconds kOversubscribedOwnerWindow{2000000};
  std::atomic<int64_t> owner_window_ns_{kOwnerWindow.count()};  // set_oversubscribed picks one of the two
  // After serving an arrival while the owner is away, the receiver thread keeps polling for this long
  // (RWIN_TCP_RECEIVER_SPIN_US) before it sleeps in epoll_wait again: a passive target's next request
  // then costs no wake-up (a vCPU wake-up here is 20-30 us: the agent's passive 4 KiB get took ~33 us
  // against ~10 us, bench/RESULTS.md). An idle rank's thread never served, so it never spins.
  int64_t receiver_spin_ns_ = 50000;
  static int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> receiver_wakes_{0};
  std::atomic<uint64_t> receiver_spins_{0};
  std::atomic<uint64_t> peeks_{0};
  uint64_t rebuffered_ = 0;  // under rx_mu_ (whoever serves holds it)
  uint64_t recv_calls_ = 0;  // recv()/recvmsg() calls on data connections, under rx_mu_ (receive_calls())
  // Set when a payload's last read (read_with_tail) came back short: the socket is empty, and pump()
  // takes what is buffered without a recv() that would only learn EAGAIN. Under rx_mu_.
  bool rx_dry_ = false;
  std::atomic<bool> close_listener_{false};
  std::vector<Pending> pending_;  // under rx_mu_
  // Where a discarded payload goes (a refused write, a write into a region freed meanwhile); under rx_mu_.
  static constexpr size_t kDiscardBytes = 64 * 1024;
  // At most this much of a socket is peeked (pump): a small write, the notify after it, headers.
  static constexpr size_t kPeekBytes = 8 * 1024;
  std::unique_ptr<char[]> discard_{new char[kDiscardBytes]};
  size_t strangers_ = 0;          // connections dropped before authentication

  // Connect: the receiver thread reports authenticated in-connections here.
  std::mutex conn_mu_;
  std::condition_variable conn_cv_;
  int in_connected_ = 0;

  // Completions the receiver thread produced (replies), drained by poll().
  std::mutex cq_mu_;
  std::vector<Completion> cq_;
  std::atomic<size_t> cq_count_{0};
  std::vector<Completion> done_;  // caller thread: sends finished in post()
  std::vector<int> active_;       // caller thread: peers with queued sends

  bool connected_ = false;
  bool quiesced_ = false;
};

}  // namespace rwin::transport::tcp

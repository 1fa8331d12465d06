// The tcp transport's receive side, whoever serves it (tcp_receiver.cpp): applies the requests peers
// send (writes land straight in the window, reads are served from it, atomics are CPU atomics on it),
// returns the replies, and reads the replies to this rank's own requests (handshakes: tcp_accept.cpp;
// striping's lanes: tcp_lanes.cpp; a duplex connection's: tcp_duplex.cpp).
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace rwin::transport::tcp {

// ---- failure ----------------------------------------------------------------------------------

void TcpTransport::fail(int p, const std::string& why) noexcept {
  Peer& P = *peers_[static_cast<size_t>(p)];
  std::string name;
  {
    std::lock_guard<std::mutex> g(conn_mu_);  // connect() writes the peers' addresses under it
    name = who(p);
  }
  std::deque<Awaiting> lost;
  {
    std::lock_guard<std::mutex> g(P.mu);
    if (P.failed) return;
    P.error = name + ": " + why;
    P.failed = true;
    lost.swap(P.awaiting);
    P.awaiting_n.store(0, std::memory_order_relaxed);
    // Nothing of this rank reads or writes the peer's sockets again; they close in quiesce().
    const auto close_down = [&](int fd) {
      if (fd < 0) return;
      if (epoll_fd_ >= 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      ::shutdown(fd, SHUT_RDWR);
    };
    close_down(P.out_fd);
    close_down(P.in_fd);
    for (int k = 0; k < tcpw::kMaxSockets - 1; ++k) {
      close_down(P.lane_out[k].fd);
      close_down(P.lane_in[k].fd);
    }
  }
  RWIN_LOG(Info, Core, "%s: %s", name.c_str(), why.c_str());
  if (lost.empty()) return;
  std::lock_guard<std::mutex> g(cq_mu_);
  for (const auto& a : lost) cq_.push_back({a.cookie, false, P.error});
  cq_count_.store(cq_.size(), std::memory_order_release);
}

// ---- requests from a peer (this rank is the target) --------------------------------------------

void TcpTransport::refuse(int p, const std::string& why) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  RWIN_LOG(Warn, Core, "tcp rank %d: refused a request of rank %d: %s", rank_, p, why.c_str());
  ReplyItem r;
  r.hdr.type = static_cast<uint8_t>(tcpw::Rep::Refused);
  r.text = (run_time_ ? describe() : "rank " + std::to_string(rank_)) + " refused it: " + why;
  if (r.text.size() > tcpw::kMaxRefusalBytes) r.text.resize(tcpw::kMaxRefusalBytes);
  r.hdr.len = r.text.size();
  P.replies.push_back(std::move(r));
}

void TcpTransport::on_in(int p) {
  (void)pump(p, true);
  if (!peers_[static_cast<size_t>(p)]->failed) (void)send_replies(p);  // what the requests asked for
}

// Reads what one of p's sockets holds (its requests, or the replies to this rank's): first the
// payload being landed, then the frames buffered, then more bytes; at most 64 rounds per event, as
// level-triggered epoll reports the rest. false: the peer failed.
bool TcpTransport::pump(int p, bool requests) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  RxBuffer& rx = requests ? P.in_rx : P.out_rx;
  const int fd = requests ? P.in_fd : P.out_fd;
  // A duplex connection (requests: its one socket) lands a write's payload or a read's, whichever
  // frame came last.
  const bool both = requests && duplex(p);
  const auto left = [&] { return requests ? P.in_land.left + (both ? P.out_land.left : 0) : P.out_land.left; };
  const auto land = [&] { return requests && P.in_land.left > 0 ? land_write(p) : land_read(p); };
  const auto take = [&] { return requests ? take_in(p) : take_replies(p); };
  rx_dry_ = false;
  for (int round = 0; round < 64 && !P.failed; ++round) {
    if (requests && P.fenced) return true;  // the lanes' writes first (on_lane lifts the fence)
    if (left() > 0) {
      if (!land()) return false;
      if (left() > 0) return true;  // the socket ran dry
      continue;
    }
    if (rx.size() > 0 && !take()) return false;
    if (left() > 0) continue;
    if (requests && !unpeek(p)) return false;
    if (!rx.data) rx.data.reset(new char[RxBuffer::kBytes]);
    if (rx.end == RxBuffer::kBytes) rx.compact();
    const size_t room = RxBuffer::kBytes - rx.end;
    // Small requests that ask for no answer (writes, notifies) are peeked by a waiting owner, and
    // read for good at the next look at this socket (unpeek). A read that drains a socket carrying
    // data one way only (a peer's puts and notifies travel on its connection, this rank's on its
    // own) makes Linux acknowledge at once, inside that recv() and before it returns, and on loopback
    // the ACK is processed there too: ~1 us on the way from a peer's notify to this rank's answer. A
    // peek leaves the bytes queued, so the ACK leaves with the read after the answer (bench/RESULTS.md,
    // "The ACK after the answer"). Not peeked: a socket whose last read filled what it asked for
    // (it streams, and a peek would copy twice), one whose last requests were answered (gets,
    // fetching atomics: their replies carry the ACK), replies (they answer this rank's requests),
    // what the receiver thread reads (its epoll would report the queued bytes again at once), and an
    // agent's (run-time peers: its owner arms and sleeps after a poll, and the bytes it left queued
    // woke it again through the receiver thread; a 4 KiB put+notify to a passive agent took 29 us).
    // (Nor a duplex connection's: the answer carries the ACK there.)
    // After a big payload, the next header alone (RxBuffer::header_first; on a duplex connection
    // with nothing buffered, one of the kind of that payload's frame, RxBuffer::header_bytes).
    // Usually the payload's last read took it already (read_with_tail), and a short one told that
    // the socket was empty then (rx_dry_).
    if (rx_dry_) {
      rx_dry_ = false;
      return true;
    }
    size_t head = 0;
    if (rx.header_first) {
      const bool req = requests && (!both || (rx.size() == 0 ? !rx.after_reply : !next_is_reply(p)));
      const size_t h = req ? sizeof(tcpw::ReqHeader) : sizeof(tcpw::RepHeader);
      head = h > rx.size() ? h - rx.size() : 0;
    }
    const bool peek = head == 0 && requests && !both && owner_serving_ && !run_time_ && !P.in_streaming && !P.in_answered;
    const size_t ask = head > 0 ? std::min(room, head) : peek ? std::min(room, kPeekBytes) : room;
    ++recv_calls_;
    const ssize_t r = ::recv(fd, rx.data.get() + rx.end, ask, MSG_DONTWAIT | (peek ? MSG_PEEK : 0));
    if (r == 0) {
      bool bye;
      {
        std::lock_guard<std::mutex> g(P.mu);
        bye = P.said_goodbye;
      }
      fail(p, bye ? "it left the job (its transport shut down)" : "the connection was closed by the peer (did it die?)");
      return false;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      fail(p, std::string(requests ? "receiving its requests: " : "receiving its replies: ") + errno_text(errno));
      return false;
    }
    rx.end += static_cast<size_t>(r);
    if (requests) P.in_heard = true;
    if (peek) {
      P.in_peeked = static_cast<size_t>(r);
      peeks_.fetch_add(1, std::memory_order_relaxed);
    }
    if (requests) P.in_streaming = static_cast<size_t>(r) == ask;
    count_arrival();
    if (!take()) return false;
    if (requests) P.in_answered = !P.replies.empty();
    // A short read drained the socket: no second recv() to learn EAGAIN (epoll reports what comes next).
    if (static_cast<size_t>(r) < ask && left() == 0) return true;
  }
  return !P.failed;
}

bool TcpTransport::unpeek(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  size_t& left = P.in_peeked;
  while (left > 0) {
    ++recv_calls_;
    const ssize_t r = ::recv(P.in_fd, discard_.get(), std::min(left, kDiscardBytes), MSG_DONTWAIT);
    if (r > 0) {
      left -= static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    // The bytes were queued when peeked: only a reset (or a close that lost them) takes them away.
    left = 0;
    fail(p, r == 0 ? std::string("the connection was closed by the peer (did it die?)")
                   : "receiving its requests: " + (errno == EAGAIN || errno == EWOULDBLOCK
                                                       ? std::string("bytes it had sent vanished")
                                                       : errno_text(errno)));
    return false;
  }
  return true;
}

bool TcpTransport::take_requests(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  RxBuffer& rx = P.in_rx;
  while (P.in_land.left == 0 && !P.fenced && rx.size() >= sizeof(tcpw::ReqHeader) && !next_is_reply(p)) {
    tcpw::ReqHeader h;
    std::memcpy(&h, rx.data.get() + rx.begin, sizeof h);
    if (const std::string bad = tcpw::check_request(h); !bad.empty()) {
      fail(p, "protocol error in its requests: " + bad);
      return false;
    }
    rx.begin += sizeof h;
    const auto t = static_cast<tcpw::Req>(h.type);
    if (t == tcpw::Req::Fence) {
      if (run_time_) {
        fail(p, "protocol error in its requests: a fence from a run-time peer (it has no lanes)");
        return false;
      }
      P.fence[0] = h.addr;
      P.fence[1] = h.operand;
      P.fence[2] = h.compare;
      if (!fence_passed(p)) {
        if (P.failed) return false;
        P.fenced = true;  // what follows waits on its lanes (on_lane lifts it)
        update_in_events(p);
      }
      continue;
    }
    if (t == tcpw::Req::Flush) {
      ReplyItem r;
      r.hdr.type = static_cast<uint8_t>(tcpw::Rep::FlushAck);
      P.replies.push_back(std::move(r));
      continue;
    }
    if (t == tcpw::Req::Goodbye) {
      std::lock_guard<std::mutex> g(P.mu);
      P.said_goodbye = true;
      continue;
    }
    // Every other request names a region and a range in it.
    const std::string bad = check_target(h);
    switch (t) {
      case tcpw::Req::Write:
      case tcpw::Req::WriteAdd:
        P.in_land = {};
        P.in_land.left = h.len;
        rx.header_first = h.len >= RxBuffer::kHeaderFirstBytes;
        rx.after_reply = false;
        P.in_land.region = bad.empty() ? h.region : 0;
        P.in_land.addr = h.addr;
        if (t == tcpw::Req::WriteAdd) {  // its payload collects in add_buf (at most kMaxAddFrameBytes)
          P.in_land.add = true;
          P.in_land.dtype = h.operand;
          P.in_land.total = h.len;
          if (bad.empty() && P.add_cap < h.len) {
            P.add_buf.reset(new char[h.len]);
            P.add_cap = h.len;
          }
        }
        if (!bad.empty()) refuse(p, bad);
        if (!land_write(p)) return false;  // what is buffered already
        break;
      case tcpw::Req::Read: {
        if (!bad.empty()) {
          refuse(p, bad);
          break;
        }
        ReplyItem r;
        r.hdr.type = static_cast<uint8_t>(tcpw::Rep::ReadData);
        r.hdr.len = h.len;
        r.region = h.region;
        r.addr = h.addr;
        P.replies.push_back(std::move(r));
        break;
      }
      default:
        if (!bad.empty()) {
          refuse(p, bad);
          break;
        }
        apply_atomic(p, h);
        break;
    }
  }
  if (rx.size() == 0) rx.begin = rx.end = 0;
  return true;
}

std::string TcpTransport::check_target(const tcpw::ReqHeader& h) {
  std::lock_guard<std::mutex> g(regions_->mu);
  auto it = regions_->live.find(h.region);
  if (it == regions_->live.end()) {
    return std::string(tcpw::req_name(h.type)) + " of " + std::to_string(h.len) + " bytes into region " +
           std::to_string(h.region) + ", which this rank does not expose (freed, or never allocated)";
  }
  if (!tcpw::inside(reinterpret_cast<uint64_t>(it->second.base), it->second.bytes, h.addr, h.len)) {
    return std::string(tcpw::req_name(h.type)) + " of " + std::to_string(h.len) + " bytes at offset " +
           std::to_string(static_cast<int64_t>(h.addr - reinterpret_cast<uint64_t>(it->second.base))) +
           " of region " + std::to_string(h.region) + " (" + std::to_string(it->second.bytes) + " bytes)";
  }
  if (static_cast<tcpw::Req>(h.type) == tcpw::Req::WriteAdd && !it->second.adder) {
    return std::string(tcpw::req_name(h.type)) + " of " + std::to_string(h.len) + " bytes into region " +
           std::to_string(h.region) + ", which takes no put(Add) (not a window's data)";
  }
  return {};
}

ssize_t TcpTransport::read_with_tail(int fd, char* dst, size_t want, RxBuffer& rx) {
  rx.begin = rx.end = 0;  // empty: the header goes to its start
  const size_t tail = rx.header_bytes();
  iovec iov[2] = {{dst, want}, {rx.data.get(), tail}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  ++recv_calls_;
  const ssize_t r = ::recvmsg(fd, &m, MSG_DONTWAIT);
  if (r > 0 && static_cast<size_t>(r) > want) rx.end = static_cast<size_t>(r) - want;
  if (r > 0 && static_cast<size_t>(r) < want + tail) rx_dry_ = true;
  return r;
}

int TcpTransport::recv_payload(int p, int fd, Peer::Landing& L, char* dst, size_t want, int lane, RxBuffer* next) {
  if (lane == 0 && rx_dry_) return 0;  // this pump's last read emptied the socket
  for (;;) {
    ssize_t r;
    if (next != nullptr) {
      r = read_with_tail(fd, dst, want, *next);
    } else {
      ++recv_calls_;
      r = ::recv(fd, dst, want, MSG_DONTWAIT);
    }
    if (r > 0) {
      count_arrival();
      const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(r), want);
      L.left -= n;
      L.addr += n;
      return 1;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    const std::string on = lane > 0 ? "lane " + std::to_string(lane) : std::string();
    fail(p, r == 0 ? (lane > 0 ? on : std::string("the connection")) + " was closed in the middle of a write's payload (did the peer die?)"
                   : "receiving a write's payload" + (lane > 0 ? " on " + on : std::string()) + ": " + errno_text(errno));
    return -1;
  }
}

char* TcpTransport::write_dst(Peer::Landing& L, size_t& want, std::unique_lock<std::mutex>& g) {
  if (L.region != 0) {
    g.lock();
    if (regions_->live.count(L.region) != 0) {
      want = static_cast<size_t>(L.left);
      return reinterpret_cast<char*>(L.addr);
    }
    g.unlock();
    L.region = 0;  // freed meanwhile: the rest is discarded
  }
  want = static_cast<size_t>(std::min<uint64_t>(L.left, kDiscardBytes));
  return discard_.get();
}

// Lands what is buffered of the current write, then recv()s the rest straight into the window; a
// WriteAdd's payload collects in add_buf and is added once it is all here.
bool TcpTransport::land_write(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  RxBuffer& rx = P.in_rx;
  Peer::Landing& L = P.in_land;
  while (L.left > 0) {
    if (rx.size() == 0 && !unpeek(p)) return false;  // what was peeked is behind us: read it for good
    std::unique_lock<std::mutex> g(regions_->mu, std::defer_lock);
    size_t want = 0;
    char* dst;
    if (L.add) {  // its payload collects in add_buf (a refused one: discarded)
      dst = L.region != 0 ? P.add_buf.get() + (L.total - L.left) : discard_.get();
      want = static_cast<size_t>(std::min<uint64_t>(L.left, L.region != 0 ? L.left : kDiscardBytes));
    } else {
      dst = write_dst(L, want, g);
    }
    if (rx.size() > 0) {
      const size_t n = std::min(want, rx.size());
      std::memcpy(dst, rx.data.get() + rx.begin, n);
      rebuffered_ += n;
      rx.begin += n;
      if (rx.size() == 0) rx.begin = rx.end = 0;
      L.left -= n;
      L.addr += n;
      continue;
    }
    // The payload's last read takes the next header too, where this buffer would have read it alone.
    const bool tail = want == L.left && rx.header_first && rx.data;
    const int got = recv_payload(p, P.in_fd, L, dst, want, 0, tail ? &rx : nullptr);
    if (got <= 0) return got == 0;
  }
  if (L.add) apply_add(p);
  return true;
}

// The sums go in under the region table's mutex, so the region (and the stripe locks inside it)
// outlives them; a region freed while its payload was on the way takes nothing, as for a write.
void TcpTransport::apply_add(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  Peer::Landing& L = P.in_land;
  L.add = false;
  if (L.region == 0) return;  // refused when its header came
  std::string why;
  {
    std::lock_guard<std::mutex> g(regions_->mu);
    auto it = regions_->live.find(L.region);
    if (it == regions_->live.end()) return;
    const uint64_t off = L.addr - L.total - reinterpret_cast<uint64_t>(it->second.base);
    why = it->second.adder->add(L.dtype, off, P.add_buf.get(), L.total);
    if (!why.empty()) {
      why = "write_add of " + std::to_string(L.total) + " bytes at offset " + std::to_string(off) + " of region " +
            std::to_string(L.region) + ": " + why;
    }
  }
  if (!why.empty()) refuse(p, why);
}

void TcpTransport::apply_atomic(int p, const tcpw::ReqHeader& h) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  uint64_t old = 0;
  {
    // take_requests() checked the range, but not under this hold of the mutex: a region freed
    // since is refused, not written.
    std::lock_guard<std::mutex> g(regions_->mu);
    if (regions_->live.find(h.region) == regions_->live.end()) {
      refuse(p, std::string(tcpw::req_name(h.type)) + " into region " + std::to_string(h.region) + ", freed meanwhile");
      return;
    }
    auto* w = reinterpret_cast<uint64_t*>(h.addr);
    switch (static_cast<tcpw::Req>(h.type)) {
      case tcpw::Req::AtomicAdd:
        __atomic_fetch_add(w, h.operand, __ATOMIC_SEQ_CST);
        return;  // no reply: the initiator's completion was the send
      case tcpw::Req::FetchAdd:
        old = __atomic_fetch_add(w, h.operand, __ATOMIC_SEQ_CST);
        break;
      case tcpw::Req::Swap:
        old = __atomic_exchange_n(w, h.operand, __ATOMIC_SEQ_CST);
        break;
      case tcpw::Req::CompareSwap:
        old = h.compare;
        __atomic_compare_exchange_n(w, &old, h.operand, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        break;
      default:
        return;
    }
  }
  ReplyItem r;
  r.hdr.type = static_cast<uint8_t>(tcpw::Rep::Value);
  r.hdr.value = old;
  P.replies.push_back(std::move(r));
}

void TcpTransport::set_epoll_out(int p, bool on) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  if (P.want_out == on) return;
  P.want_out = on;
  update_in_events(p);
}

// While a Fence waits for the lanes nothing is read from in_fd, so its readiness is not asked for
// (level-triggered, it would wake the thread for bytes it will not read).
void TcpTransport::update_in_events(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  if (P.in_fd < 0 || P.failed) return;
  if (P.parked) return unpark(p);  // back into the set with these events
  epoll_event ev{};
  ev.events = (P.fenced ? 0u : static_cast<uint32_t>(EPOLLIN)) | (P.want_out ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.u64 = tag(kIn, static_cast<uint32_t>(p));
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, P.in_fd, &ev);
}

void TcpTransport::on_in_writable(int p) {
  if (!peers_[static_cast<size_t>(p)]->failed) (void)send_replies(p);
}

// Sends queued replies, several per sendmsg; a read's payload goes straight from the window.
bool TcpTransport::send_replies(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  // A duplex connection: the caller thread's requests share it, whole frames at a time (tcp_wire.h).
  const bool shared = duplex(p);
  std::unique_lock<std::mutex> tx(P.tx_mu, std::defer_lock);
  if (shared && !P.replies.empty() && !P.failed) {
    tx.lock();
    if (P.tx_half == Peer::Half::Request) {  // the caller's frame first, even if the caller is away
      const int r = finish_half_request(p);
      if (r < 0) return false;
      if (r == 0) {
        set_epoll_out(p, true);
        return true;
      }
    }
  }
  while (!P.replies.empty() && !P.failed) {
    iovec iov[64];
    int n = 0;
    std::lock_guard<std::mutex> g(regions_->mu);
    for (auto& r : P.replies) {
      if (n + 2 > 64) break;
      const char* body = nullptr;
      if (r.hdr.type == static_cast<uint8_t>(tcpw::Rep::Refused)) {
        body = r.text.data();  // hdr.len is its size
      } else if (r.hdr.len > 0) {
        if (regions_->live.find(r.region) == regions_->live.end()) {
          if (n > 0 && &r != &P.replies.front()) break;  // send what comes before it first
          // Its header promised bytes that are gone: the peer learns it as a closed connection.
          fail(p, "region " + std::to_string(r.region) + " was freed while rank " + std::to_string(p) + " read it");
          return false;
        }
        body = reinterpret_cast<const char*>(r.addr);
      }
      if (shared) r.hdr.type |= tcpw::kReplyBit;
      n = add_unsent(iov, n, r, body);
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    const ssize_t w = ::sendmsg(P.in_fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        set_epoll_out(p, true);
        return true;
      }
      fail(p, "sending replies: " + errno_text(errno));
      return false;
    }
    consume_sent(P.replies, static_cast<size_t>(w), [](const ReplyItem&) {});
    if (shared) P.tx_half = !P.replies.empty() && P.replies.front().sent > 0 ? Peer::Half::Reply : Peer::Half::None;
  }
  if (P.replies.empty()) set_epoll_out(p, false);
  return true;
}

// ---- replies to this rank's requests -----------------------------------------------------------

void TcpTransport::on_out(int p) { (void)pump(p, false); }

bool TcpTransport::take_replies(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  RxBuffer& rx = replies_rx(p);
  const bool both = duplex(p);  // its requests arrive in the same buffer: stop at the first
  while (P.out_land.left == 0 && rx.size() >= sizeof(tcpw::RepHeader) && (!both || next_is_reply(p))) {
    tcpw::RepHeader h;
    std::memcpy(&h, rx.data.get() + rx.begin, sizeof h);
    if (both) h.type = static_cast<uint8_t>(h.type & ~tcpw::kReplyBit);
    if (const std::string bad = tcpw::check_reply(h); !bad.empty()) {
      fail(p, "protocol error in its replies: " + bad);
      return false;
    }
    rx.begin += sizeof h;
    const auto t = static_cast<tcpw::Rep>(h.type);
    if (t == tcpw::Rep::Refused) {
      P.out_land = {};
      P.out_land.left = h.len;
      P.out_land.refused = h;
      if (!land_read(p)) return false;
      continue;
    }
    std::unique_lock<std::mutex> g(P.mu);
    if (P.failed) return false;
    if (P.awaiting.empty()) {
      g.unlock();
      fail(p, "protocol error: a reply to no request");
      return false;
    }
    Awaiting& a = P.awaiting.front();
    const bool fits = (t == tcpw::Rep::ReadData && a.op == Op::Read && a.bytes == h.len) ||
                      (t == tcpw::Rep::FlushAck && a.op == Op::Flush) ||
                      (t == tcpw::Rep::Value && (a.op == Op::FetchAdd || a.op == Op::Swap || a.op == Op::CompareSwap));
    if (!fits) {
      g.unlock();
      fail(p, std::string("protocol error: a reply of type ") + std::to_string(h.type) + " to a " + op_name(a.op));
      return false;
    }
    if (t == tcpw::Rep::ReadData) {
      P.out_land = {};
      P.out_land.left = h.len;
      rx.header_first = h.len >= RxBuffer::kHeaderFirstBytes;
      rx.after_reply = true;
      P.out_land.local = a.local;
      g.unlock();
      if (!land_read(p)) return false;
      continue;
    }
    if (t == tcpw::Rep::Value) std::memcpy(a.local, &h.value, 8);
    complete_front(P, g);
  }
  if (rx.size() == 0) rx.begin = rx.end = 0;
  return true;
}

// Lands a read's data in the caller's buffer (or a refusal's text), from the buffer, then the socket.
bool TcpTransport::land_read(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  RxBuffer& rx = replies_rx(p);
  const int fd = duplex(p) ? P.in_fd : P.out_fd;
  Peer::Landing& L = P.out_land;
  const bool text = L.refused.type == static_cast<uint8_t>(tcpw::Rep::Refused);
  while (L.left > 0) {
    std::unique_lock<std::mutex> g(P.mu);
    if (P.failed) return false;  // the caller may have freed the buffer: touch nothing
    char tmp[tcpw::kMaxRefusalBytes];
    char* dst = text ? tmp : L.local;
    const size_t want = static_cast<size_t>(text ? std::min<uint64_t>(L.left, sizeof tmp) : L.left);
    size_t got = 0;
    if (rx.size() > 0) {
      got = std::min(want, rx.size());
      std::memcpy(dst, rx.data.get() + rx.begin, got);
      if (!text) rebuffered_ += got;
      rx.begin += got;
      if (rx.size() == 0) rx.begin = rx.end = 0;
    } else {
      // The reply's last read takes the next header too (read_with_tail), as land_write does.
      if (rx_dry_) return true;  // this pump's last read emptied the socket
      const bool tail = !text && want == L.left && rx.header_first && rx.data;
      ssize_t r;
      if (tail) {
        r = read_with_tail(fd, dst, want, rx);
      } else {
        ++recv_calls_;
        r = ::recv(fd, dst, want, MSG_DONTWAIT);
      }
      if (r <= 0) {
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        g.unlock();
        fail(p, r == 0 ? "the connection was closed in the middle of a reply (did the peer die?)"
                       : "receiving a reply: " + errno_text(errno));
        return false;
      }
      got = std::min(static_cast<size_t>(r), want);
      count_arrival();
    }
    L.left -= got;
    if (text) {
      L.text.append(tmp, got);
    } else {
      L.local += got;
    }
    if (L.left > 0) continue;
    if (text) {
      g.unlock();
      fail(p, L.text);
      return false;
    }
    complete_front(P, g);
  }
  return true;
}

void TcpTransport::complete_front(Peer& P, std::unique_lock<std::mutex>& g) {
  const uint64_t cookie = P.awaiting.front().cookie;
  P.awaiting.pop_front();
  P.awaiting_n.store(P.awaiting.size(), std::memory_order_relaxed);
  g.unlock();
  std::lock_guard<std::mutex> cg(cq_mu_);
  cq_.push_back({cookie, true, {}});
  cq_count_.store(cq_.size(), std::memory_order_release);
}

}  // namespace rwin::transport::tcp

// The tcp transport's initiator side (the caller's thread): post() frames a request and sends it
// from the caller's buffer; poll() finishes partial sends, serves arrivals while the owner waits
// (tcp_receiver.cpp) and collects the completions.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace rwin::transport::tcp {

namespace {

tcpw::Req req_of(Op op) {
  switch (op) {
    case Op::Write: return tcpw::Req::Write;
    case Op::Read: return tcpw::Req::Read;
    case Op::AtomicAdd: return tcpw::Req::AtomicAdd;
    case Op::FetchAdd: return tcpw::Req::FetchAdd;
    case Op::CompareSwap: return tcpw::Req::CompareSwap;
    case Op::Swap: return tcpw::Req::Swap;
    case Op::Flush: return tcpw::Req::Flush;
    case Op::Accumulate: return tcpw::Req::WriteAdd;
  }
  return tcpw::Req::Flush;
}

}  // namespace

std::string TcpTransport::peer_error(int peer) const {
  if (peer < 0 || peer >= peer_count()) {
    return run_time_ ? "tcp: no run-time peer " + std::to_string(peer) + " (" + std::to_string(peer_count()) + " added)"
                     : "tcp: no rank " + std::to_string(peer) + " in a job of " + std::to_string(nranks_);
  }
  Peer& P = *peers_[static_cast<size_t>(peer)];
  std::lock_guard<std::mutex> g(P.mu);
  return P.error;
}

void TcpTransport::fail_peer(int peer, const std::string& why) noexcept {
  if (peer < 0 || peer >= peer_count()) return;
  fail(peer, why);
}

// Everything still queued for a failed peer completes, failed.
void TcpTransport::fail_queued(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  if (P.sendq.empty() && P.lanes_queued() == 0) return;
  std::lock_guard<std::mutex> tx(P.tx_mu);  // the receive side may hold sendq's front (tx_req)
  P.tx_half = Peer::Half::None;
  P.tx_req = nullptr;
  const std::string why = peer_error(p);
  const auto drop = [&](std::deque<SendItem>& q) {
    for (const auto& s : q) {
      // An item that waits for a reply was failed with the awaiting list, an inline Write completed
      // when posted; the others fail here.
      if (s.complete_when_sent) done_.push_back({s.cookie, false, why});
    }
    q.clear();
  };
  drop(P.sendq);
  for (int k = 0; k < P.nlanes; ++k) drop(P.lane_out[k].sendq);
  P.held = 0;
}

bool TcpTransport::send_queue(int p, int fd, std::deque<SendItem>& q, int lane) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  // A duplex connection: the receive side's replies share it (tcp_wire.h), so the frames take turns.
  const bool shared = lane == 0 && duplex(p);
  std::unique_lock<std::mutex> tx(P.tx_mu, std::defer_lock);
  if (shared) {
    tx.lock();
    // A request the receive side finished for us while we were away: it completes here.
    while (!q.empty() && q.front().sent == q.front().total()) {
      if (q.front().complete_when_sent) done_.push_back({q.front().cookie, true, {}});
      q.pop_front();
    }
    if (P.tx_half == Peer::Half::Reply) return true;  // its rest goes first (EPOLLOUT), then ours
  }
  while (!q.empty()) {
    if (P.failed) {
      if (tx.owns_lock()) tx.unlock();
      fail_queued(p);
      return false;
    }
    iovec iov[64];
    int n = 0;
    for (auto& s : q) {
      if (n + 2 > 64) break;
      n = add_unsent(iov, n, s, s.payload);
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    const ssize_t w = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      fail(p, std::string(lane > 0 ? "sending writes on lane " + std::to_string(lane) + ": " : "sending requests: ") +
                  errno_text(errno));
      if (tx.owns_lock()) tx.unlock();
      fail_queued(p);
      return false;
    }
    consume_sent(q, static_cast<size_t>(w), [this](const SendItem& s) {
      if (s.complete_when_sent) done_.push_back({s.cookie, true, {}});
    });
    if (shared) {  // a frame left half sent: no reply may follow it until it is out
      const bool half = !q.empty() && q.front().sent > 0;
      P.tx_half = half ? Peer::Half::Request : Peer::Half::None;
      P.tx_req = half ? &q.front() : nullptr;
    }
  }
  return true;
}

// The lanes first: the first connection's Fence, if any, waits for their Writes at the target.
bool TcpTransport::flush_sends(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  P.held = 0;  // what waited goes now
  for (int k = 0; k < P.nlanes; ++k) {
    if (!send_queue(p, P.lane_out[k].fd, P.lane_out[k].sendq, k + 1)) return false;
  }
  return send_queue(p, P.out_fd, P.sendq, 0);
}

PostResult TcpTransport::post(const Work& w) {
  if (!connected_ || quiesced_ || w.peer < 0 || w.peer >= peer_count()) return PostResult::PeerFailed;
  const int p = w.peer;
  Peer& P = *peers_[static_cast<size_t>(p)];
  if (!P.failed && P.out_fd < 0) fail(p, std::string(op_name(w.op)) + " posted before connect_peer()");
  if (P.failed) {
    fail_queued(p);
    return PostResult::PeerFailed;
  }
  if (w.op != Op::Flush && w.rkey == nullptr) {
    done_.push_back({w.cookie, false, who(p) + ": " + op_name(w.op) + " without a remote key"});
    return PostResult::Ok;
  }
  if ((w.op == Op::Write || w.op == Op::Read || w.op == Op::Accumulate) && w.bytes == 0) {
    done_.push_back({w.cookie, true, {}});  // nothing to move
    return PostResult::Ok;
  }
  if (w.op == Op::Accumulate && (w.bytes > tcpw::kMaxAddFrameBytes || w.operand > 255)) {
    done_.push_back({w.cookie, false, who(p) + ": accumulate of " + std::to_string(w.bytes) + " bytes, type code " +
                                          std::to_string(w.operand) + " (at most " +
                                          std::to_string(tcpw::kMaxAddFrameBytes) + " bytes per Work, codes below 256)"});
    return PostResult::Ok;
  }
  const auto in_flight = [&] { return P.sendq.size() + P.lanes_queued() + P.awaiting_n.load(std::memory_order_relaxed); };
  if (in_flight() >= kMaxInFlight) {
    (void)flush_sends(p);
    if (in_flight() >= kMaxInFlight) return PostResult::Busy;
  }
  const auto list = [&] {
    if (!P.listed) {
      P.listed = true;
      active_.push_back(p);
    }
  };
  // Striping: a Write of at least RWIN_TCP_STRIPE_MIN takes the next of the first connection and the
  // lanes, round-robin. On a lane it leaves from the caller's buffer and completes once sent.
  if (w.op == Op::Write && P.nlanes > 0 && w.bytes >= stripe_min_) {
    const int lane = static_cast<int>(P.next_lane++ % static_cast<uint64_t>(P.nlanes + 1));
    if (lane > 0) {
      Peer::LaneOut& L = P.lane_out[lane - 1];
      SendItem s;
      s.cookie = w.cookie;
      s.hdr.type = static_cast<uint8_t>(tcpw::Req::Write);
      s.hdr.region = static_cast<const TcpKey*>(w.rkey)->region();
      s.hdr.addr = w.remote_addr;
      s.hdr.len = w.bytes;
      s.payload = static_cast<const char*>(w.local);
      s.complete_when_sent = true;
      L.sendq.push_back(std::move(s));
      ++L.writes;
      ++lane_writes_;
      P.unfenced = true;
      list();
      (void)send_queue(p, L.fd, L.sendq, lane);
      return PostResult::Ok;
    }
  }
  // Anything on the first connection after Writes on the lanes waits at the target until they have
  // all landed: a notify, flush, get or put(Add) then sees them, as on one socket.
  if (P.unfenced) {
    SendItem f;
    f.hdr.type = static_cast<uint8_t>(tcpw::Req::Fence);
    f.hdr.addr = P.lane_out[0].writes;
    f.hdr.operand = P.lane_out[1].writes;
    f.hdr.compare = P.lane_out[2].writes;
    static_assert(tcpw::kMaxSockets - 1 == 3, "a Fence names three lanes' counts");
    P.sendq.push_back(std::move(f));
    P.unfenced = false;
    ++fences_;
  }
  SendItem s;
  s.cookie = w.cookie;
  s.hdr.type = static_cast<uint8_t>(req_of(w.op));
  if (w.op != Op::Flush) {
    s.hdr.region = static_cast<const TcpKey*>(w.rkey)->region();
    s.hdr.addr = w.remote_addr;
  }
  switch (w.op) {
    case Op::Accumulate:
      s.hdr.operand = w.operand;  // the element type's code
      [[fallthrough]];
    case Op::Write:
      s.hdr.len = w.bytes;
      if (w.bytes <= SendItem::kInline) {
        s.inline_data.reset(new char[w.bytes]);
        std::memcpy(s.inline_data.get(), w.local, w.bytes);
        s.payload = s.inline_data.get();
        done_.push_back({w.cookie, true, {}});
      } else {
        s.payload = static_cast<const char*>(w.local);
        s.complete_when_sent = true;
      }
      break;
    case Op::Read:
      s.hdr.len = w.bytes;
      break;
    case Op::AtomicAdd:
      s.hdr.len = 8;
      s.hdr.operand = w.operand;
      s.complete_when_sent = true;
      break;
    case Op::FetchAdd:
    case Op::Swap:
    case Op::CompareSwap:
      s.hdr.len = 8;
      s.hdr.operand = w.operand;
      s.hdr.compare = w.compare;
      break;
    case Op::Flush:
      break;
  }
  if (w.op != Op::Write && w.op != Op::AtomicAdd && w.op != Op::Accumulate) {
    // The reply may come before sendmsg returns: the receiver thread must find it listed.
    std::lock_guard<std::mutex> g(P.mu);
    if (P.failed) return PostResult::PeerFailed;
    P.awaiting.push_back({w.op, w.cookie, static_cast<char*>(w.local), w.op == Op::Read ? w.bytes : 8});
    P.awaiting_n.store(P.awaiting.size(), std::memory_order_relaxed);
  }
  // A Write of at most SendItem::kInline bytes was copied into its frame and completed above (the
  // caller may reuse its buffer, so put() returns without a send); the frame waits for what follows
  // it, usually the notify that publishes it, so both leave in one sendmsg and one segment.
  const bool staged = (w.op == Op::Write || w.op == Op::Accumulate) && w.bytes <= SendItem::kInline;
  P.sendq.push_back(std::move(s));
  list();
  // At most kMaxHeld wait: a burst of small puts leaves as it is posted, kMaxHeld frames per sendmsg, instead of
  // all at the flush that ends it (measured: an agent's 2000 blocking 4 KiB puts then a flush ran at
  // ~150-200 MiB/s held whole, the receiver idle until the flush).
  if (staged && ++P.held < SendItem::kMaxHeld) return PostResult::Ok;
  (void)flush_sends(p);
  return PostResult::Ok;
}

void TcpTransport::poll(std::vector<Completion>& out) {
  served_at_poll_ = served_.load();  // arm() asks whether the receiver thread served since
  if (owner_serves_) owner_seen_ns_.store(now_ns(), std::memory_order_relaxed);
  // A poll with completions to hand back skips looking for arrivals if the last one looked: the
  // caller polls again when it needs more, and a blocking put's own completion (an inline write,
  // done in post()) then costs no syscall on its way to the notify after it.
  const bool have = !done_.empty() || cq_count_.load(std::memory_order_acquire) > 0;
  if (owner_serves_ && !(have && served_last_) && rx_mu_.try_lock()) {
    owner_serving_ = true;  // pump() may peek (tcp_target.cpp)
    (void)serve_direct(owner_rounds_);
    owner_serving_ = false;
    rx_mu_.unlock();
    served_last_ = true;
  } else {
    served_last_ = false;
  }
  for (size_t i = 0; i < active_.size();) {
    const int p = active_[i];
    Peer& P = *peers_[static_cast<size_t>(p)];
    if (P.sendable() || P.failed) (void)flush_sends(p);  // held writes wait (transport.h)
    if (P.sendq.empty() && P.lanes_queued() == 0) {
      P.listed = false;
      active_[i] = active_.back();
      active_.pop_back();
    } else {
      ++i;
    }
  }
  if (!done_.empty()) {
    for (auto& c : done_) out.push_back(std::move(c));
    done_.clear();
  }
  if (cq_count_.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> g(cq_mu_);
    for (auto& c : cq_) out.push_back(std::move(c));
    cq_.clear();
    cq_count_.store(0, std::memory_order_release);
  }
}

}  // namespace rwin::transport::tcp

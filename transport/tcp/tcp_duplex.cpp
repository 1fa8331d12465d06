// A duplex connection's receive side (RWIN_TCP_DUPLEX, tcp_wire.h): one socket of a pair of ranks
// brings the peer's requests and its replies to this rank's, told apart by kReplyBit, and carries this
// rank's replies and requests back; the receive side finishes a request the caller left half sent, so
// a reply can follow it while the caller is away; and its socket leaves the epoll set while the owner
// serves it (parking, RWIN_TCP_PARK). Runs under rx_mu_ (the receiver thread or the owner's poll).
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include "transport/tcp/tcp_transport_impl.h"

namespace rwin::transport::tcp {

bool TcpTransport::next_is_reply(int p) const noexcept {
  const Peer& P = *peers_[static_cast<size_t>(p)];
  return duplex(p) && P.in_rx.size() > 0 && (static_cast<uint8_t>(P.in_rx.data[P.in_rx.begin]) & tcpw::kReplyBit) != 0;
}

// A duplex connection's frames in arrival order: runs of requests, runs of replies, until a payload
// is still on its way, the next frame is not all here, or a Fence holds the requests.
bool TcpTransport::take_in(int p) {
  if (!duplex(p)) return take_requests(p);
  Peer& P = *peers_[static_cast<size_t>(p)];
  const RxBuffer& rx = P.in_rx;
  while (P.in_land.left == 0 && P.out_land.left == 0 && !P.fenced && !P.failed) {
    const bool reply = next_is_reply(p);
    const size_t before = rx.size();
    if (before < (reply ? sizeof(tcpw::RepHeader) : sizeof(tcpw::ReqHeader))) return true;
    if (!(reply ? take_replies(p) : take_requests(p))) return false;
    if (rx.size() == before && P.in_land.left == 0 && P.out_land.left == 0) return true;  // nothing taken
  }
  return !P.failed;
}

void TcpTransport::park_sockets() {
  // Only where the owner's polls recv() every socket directly (serve_direct): with more, every poll
  // goes through serve(), and a recv() per parked socket per poll cost what epoll's callbacks saved
  // (4 ranks' collectives on 2 cores: within +-6 % either way, no gain).
  if (!owner_serves_ || peer_count() > kDirectPeers) return;
  int sockets = 0;
  for (int p = 0; p < peer_count(); ++p) {
    const Peer& P = *peers_[static_cast<size_t>(p)];
    sockets += duplex(p) && P.in_fd >= 0 && !P.failed;
  }
  if (sockets > kDirectSockets) return;
  for (int p = 0; p < peer_count(); ++p) {
    Peer& P = *peers_[static_cast<size_t>(p)];
    if (P.parked || !duplex(p) || P.in_fd < 0 || P.failed || P.want_out || P.fenced) continue;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, P.in_fd, nullptr) != 0) continue;
    P.parked = true;
    ++parked_;
  }
}

void TcpTransport::unpark(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  P.parked = false;
  --parked_;
  if (P.failed) return;  // fail() took it out for good
  epoll_event ev{};
  ev.events = (P.fenced ? 0u : static_cast<uint32_t>(EPOLLIN)) | (P.want_out ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.u64 = tag(kIn, static_cast<uint32_t>(p));
  // Level-triggered: what arrived while it was out is reported at once.
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, P.in_fd, &ev) != 0) fail(p, "epoll: " + errno_text(errno));
}

void TcpTransport::unpark_sockets() {
  for (int p = 0; parked_ > 0 && p < peer_count(); ++p) {
    if (peers_[static_cast<size_t>(p)]->parked) unpark(p);
  }
}

int TcpTransport::finish_half_request(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  SendItem& s = *P.tx_req;
  while (s.sent < s.total()) {
    iovec iov[2];
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(add_unsent(iov, 0, s, s.payload));
    const ssize_t w = ::sendmsg(P.out_fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      fail(p, "sending requests: " + errno_text(errno));
      return -1;
    }
    s.sent += static_cast<size_t>(w);
  }
  P.tx_half = Peer::Half::None;  // the caller completes and drops it at its next send
  P.tx_req = nullptr;
  return 1;
}

}  // namespace rwin::transport::tcp

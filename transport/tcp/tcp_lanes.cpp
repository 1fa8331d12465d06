// Striping's receive side (RWIN_TCP_SOCKETS, tcp_wire.h): a peer's lanes carry Write frames only;
// each is read header first and its payload recv()ed straight into the window, and the Fence that
// holds the peer's first connection is lifted once every lane landed what it names. Runs on the
// receiver thread (or the owner's poll), under rx_mu_.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "transport/tcp/tcp_transport_impl.h"

namespace rwin::transport::tcp {

bool TcpTransport::fence_passed(int p) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  for (int k = 0; k < tcpw::kMaxSockets - 1; ++k) {
    const Peer::LaneIn& L = P.lane_in[k];
    if (L.landed >= P.fence[k]) continue;
    if (L.fd < 0 || L.closed) {  // what the fence waits for can no longer come
      fail(p, "protocol error: a fence waits for " + std::to_string(P.fence[k]) + " writes on lane " +
                  std::to_string(k + 1) + ", which " + (L.fd < 0 ? "is not connected" : "was closed after " +
                  std::to_string(L.landed)));
    }
    return false;
  }
  return true;
}

void TcpTransport::on_lane(int p, int lane) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  Peer::LaneIn& L = P.lane_in[lane - 1];
  const std::string name = "lane " + std::to_string(lane);
  for (int round = 0; round < 64 && !P.failed && !L.closed; ++round) {
    if (L.land.left > 0) {
      if (!land_lane(p, lane)) return;
      if (L.land.left > 0) return;  // the socket ran dry
      ++L.landed;
      if (P.fenced && fence_passed(p)) {  // the requests that waited for this write go on
        P.fenced = false;
        update_in_events(p);
        on_in(p);
      }
      continue;
    }
    char* h = reinterpret_cast<char*>(&L.hdr);
    ++recv_calls_;
    const ssize_t r = ::recv(L.fd, h + L.got, sizeof L.hdr - L.got, MSG_DONTWAIT);
    if (r == 0) {
      if (L.got > 0) {
        fail(p, name + " was closed in the middle of a frame (did the peer die?)");
        return;
      }
      // Between two frames: its goodbye, or its death, which its first connection reports. A
      // fence that still waits on this lane fails.
      L.closed = true;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, L.fd, nullptr);
      if (P.fenced) (void)fence_passed(p);
      return;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail(p, "receiving on " + name + ": " + errno_text(errno));
      return;
    }
    count_arrival();
    L.got += static_cast<size_t>(r);
    if (L.got < sizeof L.hdr) continue;
    L.got = 0;
    std::string bad = tcpw::check_request(L.hdr);
    if (bad.empty() && static_cast<tcpw::Req>(L.hdr.type) != tcpw::Req::Write) {
      bad = std::string("a ") + tcpw::req_name(L.hdr.type) + " (a lane carries writes only)";
    }
    if (!bad.empty()) {
      fail(p, "protocol error on " + name + ": " + bad);
      return;
    }
    const std::string refused = check_target(L.hdr);
    L.land = {};
    L.land.left = L.hdr.len;
    L.land.region = refused.empty() ? L.hdr.region : 0;  // 0: discarded
    L.land.addr = L.hdr.addr;
    if (!refused.empty()) refuse(p, refused + " (on " + name + ")");
  }
}

// recv()s a lane write's payload straight into the window (a region freed meanwhile: discarded).
bool TcpTransport::land_lane(int p, int lane) {
  Peer& P = *peers_[static_cast<size_t>(p)];
  Peer::LaneIn& Ln = P.lane_in[lane - 1];
  Peer::Landing& L = Ln.land;
  while (L.left > 0) {
    std::unique_lock<std::mutex> g(regions_->mu, std::defer_lock);
    size_t want = 0;
    char* dst = write_dst(L, want, g);
    const int got = recv_payload(p, Ln.fd, L, dst, want, lane);
    if (got <= 0) return got == 0;
  }
  return true;
}

}  // namespace rwin::transport::tcp

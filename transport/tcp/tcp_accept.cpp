// The tcp transport's listener side of the handshake (tcp_wire.h): accepts connections, reads their
// hello and proof under a deadline, and hands an authenticated one to the receive side as a peer's
// first connection or one of its lanes. Runs on the receiver thread (or the owner's poll), under rx_mu_.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bootstrap/auth.h"
#include "common/log.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace rwin::transport::tcp {

using Clock = std::chrono::steady_clock;

void TcpTransport::on_accept() {
  for (;;) {
    sockaddr_in from{};
    socklen_t len = sizeof from;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors: the next event retries
    }
    if (pending_.size() >= kMaxPending) drop_pending(0, "too many unauthenticated connections (the oldest goes)");
    Pending pc;
    pc.fd = fd;
    pc.deadline = Clock::now() + kAuthDeadline;
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &from.sin_addr, buf, sizeof buf);
    pc.from = std::string(buf) + ":" + std::to_string(ntohs(from.sin_port));
    tune_data_socket(fd, congestion_);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kPending, static_cast<uint32_t>(fd));
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    pending_.push_back(std::move(pc));
  }
}

void TcpTransport::drop_pending(size_t idx, const std::string& why) {
  Pending& pc = pending_[idx];
  ++strangers_;
  RWIN_LOG(Info, Core, "tcp rank %d: dropped a connection from %s before it was authenticated: %s (%zu so far)", rank_,
           pc.from.c_str(), why.c_str(), strangers_);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, pc.fd, nullptr);
  ::close(pc.fd);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(idx));
}

void TcpTransport::on_pending(size_t idx) {
  Pending& pc = pending_[idx];
  char* dst = pc.have_hello ? reinterpret_cast<char*>(&pc.proof) : reinterpret_cast<char*>(&pc.hello);
  const size_t need = pc.have_hello ? sizeof pc.proof : sizeof pc.hello;
  const ssize_t r = ::recv(pc.fd, dst + pc.got, need - pc.got, MSG_DONTWAIT);
  if (r == 0) return drop_pending(idx, "closed during the handshake");
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    return drop_pending(idx, "recv: " + errno_text(errno));
  }
  pc.got += static_cast<size_t>(r);
  if (pc.got < need) return;
  pc.got = 0;
  if (!pc.have_hello) {
    tcpw::Challenge c;
    std::string why = tcpw::check_hello(pc.hello, rank_, run_time_ ? peer_count() : nranks_, run_time_);
    if (why.empty()) {
      // A job's rank names itself (src); a run-time peer names the index we gave it (dst).
      const int p = run_time_ ? pc.hello.dst : pc.hello.src;
      const Peer& P = *peers_[static_cast<size_t>(p)];
      const int lane = tcpw::hello_lane(pc.hello.kind);
      if (lane > 0) {
        if (lane >= sockets_ || !lanes_to(p)) {
          why = "lane " + std::to_string(lane) + " from rank " + std::to_string(p) + " (this rank takes " +
                std::to_string(lanes_to(p) ? sockets_ - 1 : 0) + " lanes from it: RWIN_TCP_SOCKETS=" + std::to_string(sockets_) + ")";
        } else if (P.lane_in[lane - 1].fd >= 0) {
          why = "lane " + std::to_string(lane) + " of rank " + std::to_string(p) + " is connected already";
        }
      } else if (P.in_fd >= 0) {
        why = (run_time_ ? "run-time peer " : "rank ") + std::to_string(p) + " is connected already";
      } else if (duplex(p) && p > rank_) {
        why = "rank " + std::to_string(p) + " dialled, but this rank dials the higher ranks itself (RWIN_TCP_DUPLEX=1)";
      } else if (run_time_ && P.failed) {  // dropped by the caller (fail_peer): not to come back
        why = "run-time peer " + std::to_string(p) + " was dropped";
      }
    }
    if (!why.empty()) {
      c.status = static_cast<uint16_t>(pc.hello.version != tcpw::kVersion ? tcpw::HandshakeStatus::WrongVersion
                                                                          : tcpw::HandshakeStatus::Refused);
      (void)::send(pc.fd, &c, sizeof c, MSG_NOSIGNAL | MSG_DONTWAIT);
      return drop_pending(idx, why);
    }
    bootstrap::auth::random_bytes(c.nonce, sizeof c.nonce);
    pc.challenge = c;
    if (::send(pc.fd, &c, sizeof c, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof c)) {
      return drop_pending(idx, "the challenge could not be sent");
    }
    pc.have_hello = true;
    return;
  }
  // The proof is complete.
  const tcpw::Transcript t(pc.hello.nonce, pc.challenge.nonce, pc.hello.src, pc.hello.dst);
  const uint8_t* secret = run_time_ ? peers_[static_cast<size_t>(pc.hello.dst)]->secret : secret_;
  const std::string key(reinterpret_cast<const char*>(secret), tcpw::kSecret);
  const auto want = bootstrap::auth::hmac(key, "rwin-tcp-client", t.bytes);
  if (!bootstrap::auth::equal(pc.proof.mac, want.data(), want.size())) {
    return drop_pending(idx, run_time_ ? "wrong proof (not the peer that endpoint was made for)"
                                       : "wrong proof (not a rank of this job)");
  }
  tcpw::Accept a;
  const auto mine = bootstrap::auth::hmac(key, "rwin-tcp-server", t.bytes);
  std::memcpy(a.mac, mine.data(), mine.size());
  if (::send(pc.fd, &a, sizeof a, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof a)) {
    return drop_pending(idx, "the accept could not be sent");
  }
  finish_handshake(pc);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(idx));
}

void TcpTransport::finish_handshake(Pending& pc) {
  const int p = run_time_ ? pc.hello.dst : pc.hello.src;
  const int lane = tcpw::hello_lane(pc.hello.kind);
  Peer& P = *peers_[static_cast<size_t>(p)];
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = lane > 0 ? tag(kLane, lane_value(p, lane)) : tag(kIn, static_cast<uint32_t>(p));
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, pc.fd, &ev);
  {
    std::lock_guard<std::mutex> g(conn_mu_);
    if (lane > 0) {
      P.lane_in[lane - 1].fd = pc.fd;
      P.has_lanes_in = true;
    } else {
      P.in_fd = pc.fd;
      if (duplex(p)) P.out_fd = pc.fd;  // this rank's requests to p go on it too
    }
    ++in_connected_;
  }
  conn_cv_.notify_all();
  RWIN_LOG(Debug, Core, "tcp rank %d: rank %d authenticated from %s%s", rank_, p, pc.from.c_str(),
           lane > 0 ? (" (lane " + std::to_string(lane) + ")").c_str() : "");
}

}  // namespace rwin::transport::tcp

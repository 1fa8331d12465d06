// Raw loopback sockets for unit tests that play a peer by hand (a stranger at the store, a rank
// doing the tcp transport's handshake itself): shared so each test file does not carry its own copy
// of the same socket/bind/connect boilerplate. Test-only; everything is 127.0.0.1.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <utility>

#include "common/reserved_port.h"

namespace test_sock {

// 127.0.0.1:port (port 0: let bind pick one).
inline sockaddr_in loopback(uint16_t port = 0) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

// A loopback port held while the object lives (see common/reserved_port.h).
using ReservedPort = rwin::common::ReservedPort;

// A port reserved for the rest of the process (unit tests take a few each); 0 if bind failed.
inline uint16_t free_port() {
  static std::deque<ReservedPort> held;
  return held.emplace_back().port();
}

// A listening socket on an ephemeral loopback port, written to *port; -1 on failure.
inline int listen_loopback(int backlog, uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback();
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

// A connected socket to 127.0.0.1:port, or -1 (errno from connect). With io_timeout_s > 0 its
// blocking sends and receives give up after that many seconds.
inline int connect_loopback(uint16_t port, int io_timeout_s = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (io_timeout_s > 0) {
    timeval tv{io_timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  const sockaddr_in a = loopback(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A connected loopback TCP pair {the end a transport adopts (nonblocking), the peer's end}.
// rcvbuf > 0: the adopted end's receive buffer (SO_RCVBUF, set on the listener so the window
// scale is agreed with it), for tests that queue frames before the transport reads any.
inline std::pair<int, int> connected_pair(int rcvbuf = 0) {
  uint16_t port = 0;
  const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback();
  socklen_t len = sizeof a;
  if (l < 0 || (rcvbuf > 0 && ::setsockopt(l, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0) ||
      ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (l >= 0) ::close(l);
    throw std::runtime_error("connected_pair: listen failed");
  }
  port = ntohs(a.sin_port);
  const int c = connect_loopback(port);
  if (c < 0) {
    ::close(l);
    throw std::runtime_error("connected_pair: connect failed");
  }
  const int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  ::close(l);
  if (s < 0) {
    ::close(c);
    throw std::runtime_error("connected_pair: accept failed");
  }
  return {s, c};
}

// Sends (sending) or receives exactly n bytes; false on EOF, error or the socket's timeout.
inline bool io(int fd, void* buf, size_t n, bool sending) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = sending ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace test_sock

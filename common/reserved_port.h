// A loopback TCP port held for as long as the object lives, for a rendezvous (RWIN_ROOT) that a
// process other than the holder will serve: rwinrun's jobs, the tests' jobs. The socket stays bound
// with SO_REUSEADDR and never listens, so the kernel hands the port to no other bind(0) or connect()
// (a UCX connection's ephemeral end included) while rank 0's store server, which sets SO_REUSEADDR
// too, can still listen on it; until it does, a connect there is refused. Picking a port by
// bind/read/close instead leaves a window in which another socket takes it and rank 0's bind fails.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace rwin::common {

class ReservedPort {
 public:
  // port() is 0 when no port could be had (errno says why). Close-on-exec: a child that execs does
  // not inherit the hold.
  ReservedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    const int one = 1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~ReservedPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  uint16_t port() const noexcept { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace rwin::common

// rwin_tcp_ref: loopback TCP references for the tcp targets of issue 4.
//   stream:   one TCP stream over 127.0.0.1, WRITE-byte send() calls for SECONDS; MiB/s at the receiver
//   pingpong: SIZE-byte messages bounced with busy-polling recv(MSG_DONTWAIT); one way = RTT / 2
// The two processes are forked here and pinned to CPU 0 (server) and CPU 1 (client), as the
// baselines did. Output: CSV lines "kind,size,p50_us,avg_us,mibs".
//
//   rwin_tcp_ref stream 1048576 2
//   rwin_tcp_ref pingpong 8,4096,65536 2000
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "rwin_tcp_ref: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu % std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)), &s);
  sched_setaffinity(0, sizeof s, &s);
}

void set_opts(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{30, 0};  // every blocking call has a deadline
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Returns a connected pair: *server_fd in the parent-to-be, *client_fd for the child.
void make_pair(int* server_fd, int* client_fd) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) die("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("bind 127.0.0.1");
  socklen_t len = sizeof a;
  getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  if (listen(ls, 1) != 0) die("listen");
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect 127.0.0.1");
  int s = accept(ls, nullptr, nullptr);
  if (s < 0) die("accept");
  close(ls);
  set_opts(s);
  set_opts(c);
  *server_fd = s;
  *client_fd = c;
}

void send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, 0);
    if (k <= 0) die("send");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// Busy-polling receive of exactly n bytes (the spin variant of the baselines' ping-pong).
void recv_spin(int fd, char* p, size_t n) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (n > 0) {
    ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
    } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
      die("recv");
    } else if (Clock::now() > deadline) {
      errno = ETIMEDOUT;
      die("recv (spin)");
    }
  }
}

void stream(size_t write_bytes, double seconds) {
  int s, c;
  make_pair(&s, &c);
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {  // client: sender on CPU 1
    close(s);
    pin(1);
    std::vector<char> buf(write_bytes, 'x');
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) send_all(c, buf.data(), buf.size());
    shutdown(c, SHUT_WR);
    close(c);
    _exit(0);
  }
  close(c);
  pin(0);
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  Clock::time_point first{};
  for (;;) {
    ssize_t k = recv(s, buf.data(), buf.size(), 0);
    if (k < 0) die("recv");
    if (k == 0) break;
    if (total == 0) first = Clock::now();
    total += static_cast<uint64_t>(k);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - first).count();
  close(s);
  waitpid(pid, nullptr, 0);
  std::printf("tcp_stream,%zu,,,%.1f\n", write_bytes, static_cast<double>(total) / secs / 1048576.0);
}

void pingpong(const std::vector<size_t>& sizes, int iters) {
  for (size_t size : sizes) {
    int s, c;
    make_pair(&s, &c);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    std::vector<char> buf(size, 'p');
    const int warm = std::max(10, iters / 10);
    if (pid == 0) {  // echo side on CPU 1
      close(s);
      pin(1);
      for (int i = 0; i < warm + iters; ++i) {
        recv_spin(c, buf.data(), size);
        send_all(c, buf.data(), size);
      }
      close(c);
      _exit(0);
    }
    close(c);
    pin(0);
    std::vector<double> one_way;
    double total = 0;
    for (int i = 0; i < warm + iters; ++i) {
      const auto t0 = Clock::now();
      send_all(s, buf.data(), size);
      recv_spin(s, buf.data(), size);
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2;
      if (i >= warm) {
        one_way.push_back(us);
        total += us;
      }
    }
    close(s);
    waitpid(pid, nullptr, 0);
    std::sort(one_way.begin(), one_way.end());
    const double avg = total / iters;
    std::printf("tcp_pingpong_spin,%zu,%.3f,%.3f,%.1f\n", size, one_way[one_way.size() / 2], avg,
                static_cast<double>(size) / avg / 1.048576);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "stream") == 0) {
    stream(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (1 << 20), argc > 3 ? std::atof(argv[3]) : 2.0);
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "pingpong") == 0) {
    std::vector<size_t> sizes;
    std::string list = argc > 2 ? argv[2] : "8";
    for (size_t p = 0; p != std::string::npos;) {
      const size_t q = list.find(',', p);
      sizes.push_back(std::strtoull(list.substr(p, q == std::string::npos ? q : q - p).c_str(), nullptr, 10));
      p = q == std::string::npos ? q : q + 1;
    }
    pingpong(sizes, argc > 3 ? std::atoi(argv[3]) : 2000);
    return 0;
  }
  std::fprintf(stderr, "usage: rwin_tcp_ref stream [WRITE_BYTES] [SECONDS] | pingpong [SIZES] [ITERS]\n");
  return 2;
}

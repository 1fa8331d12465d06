// rwin_tcp_ref: loopback TCP references for the tcp targets of issue 4.
//   stream:   one TCP stream over 127.0.0.1, WRITE-byte send() calls for SECONDS; MiB/s at the receiver
//   pingpong: SIZE-byte messages bounced with busy-polling recv(MSG_DONTWAIT); one way = RTT / 2
//             (--sockets 2: the echo on a second connection, each direction on its own; --epoll:
//             each side's socket also sits in an epoll set nobody waits on, as rwin's transport
//             keeps its sockets for its receiver thread)
//   frames:   the runtime's multi-host way of moving a tensor (a length-prefixed header, then the
//             payload, on one socket, received into a preallocated buffer), COUNT frames of SIZE
//             back to back and one 8-byte ack at the end; MiB/s from the first send to the ack
// The two processes are forked here and pinned to CPU 0 (server) and CPU 1 (client), as the
// baselines did. Every socket gets the congestion control rwin's own tcp connections get
// (--congestion, default RWIN_TCP_CONGESTION's value, else auto: transport/tcp/tcp_congestion.cpp):
// with the kernel's BBR a loopback stream of 1 MiB writes ran at half its CUBIC speed here, so a
// reference left on BBR beside rwin on CUBIC would flatter rwin. Output: CSV lines
// "kind,size,p50_us,avg_us,mibs".
//
//   rwin_tcp_ref stream 1048576 2
//   rwin_tcp_ref pingpong 8,4096,65536 2000
//   rwin_tcp_ref pingpong 8 20000 --sockets 2
//   rwin_tcp_ref pingpong 8 20000 --epoll
//   rwin_tcp_ref frames 4096,1M,256M
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/epoll.h>
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

#include "rwin/version.h"
#include "tools/cli.h"
#include "transport/tcp/tcp_congestion.h"
#include "transport/transport.h"

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

std::string g_congestion;  // every socket's (--congestion; "": the kernel's)

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
  rwin::transport::tcp::tune_data_socket(ls, g_congestion);  // as rwin's sockets; the accepted one inherits it
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("bind 127.0.0.1");
  socklen_t len = sizeof a;
  getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  if (listen(ls, 1) != 0) die("listen");
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0) die("socket");
  rwin::transport::tcp::tune_data_socket(c, g_congestion);
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

// `sockets` 2: each direction on a connection of its own, as rwin's tcp transport sends its requests
// (every TCP segment then carries data one way only, and its ACK is a segment of its own instead of
// riding on the answer: what that costs a message is the difference to one socket).
// `epoll`: each side's receiving socket is also in an epoll set (level-triggered EPOLLIN) that nobody
// waits on, as a socket of rwin's tcp transport is while its owner polls it: every arrival then runs
// the epoll callback in the sender's softirq (bench/RESULTS.md, "Where the rest of the 8 B gap goes").
void pingpong(const std::vector<size_t>& sizes, int iters, int sockets, bool epoll) {
  for (size_t size : sizes) {
    int s, c;
    make_pair(&s, &c);
    int s_in = s, c_out = c;  // where the echo comes back: the same connection, or a second one
    if (sockets == 2) make_pair(&c_out, &s_in);
    const auto watch = [&](int fd) {  // the set's fd, closed with the sockets (-1: no set)
      if (!epoll) return -1;
      const int ep = epoll_create1(EPOLL_CLOEXEC);
      if (ep < 0) die("epoll_create1");
      epoll_event ev{};
      ev.events = EPOLLIN;
      if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
      return ep;
    };
    pid_t pid = fork();
    if (pid < 0) die("fork");
    std::vector<char> buf(size, 'p');
    const int warm = std::max(10, iters / 10);
    if (pid == 0) {  // echo side on CPU 1
      close(s);
      if (s_in != s) close(s_in);
      pin(1);
      const int ep = watch(c);
      for (int i = 0; i < warm + iters; ++i) {
        recv_spin(c, buf.data(), size);
        send_all(c_out, buf.data(), size);
      }
      close(c);
      if (c_out != c) close(c_out);
      if (ep >= 0) close(ep);
      _exit(0);
    }
    close(c);
    if (c_out != c) close(c_out);
    pin(0);
    const int ep = watch(s_in);
    std::vector<double> one_way;
    double total = 0;
    for (int i = 0; i < warm + iters; ++i) {
      const auto t0 = Clock::now();
      send_all(s, buf.data(), size);
      recv_spin(s_in, buf.data(), size);
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2;
      if (i >= warm) {
        one_way.push_back(us);
        total += us;
      }
    }
    close(s);
    if (s_in != s) close(s_in);
    if (ep >= 0) close(ep);
    waitpid(pid, nullptr, 0);
    std::sort(one_way.begin(), one_way.end());
    const double avg = total / iters;
    const std::string kind = std::string(sockets == 2 ? "tcp_pingpong_spin_2sock" : "tcp_pingpong_spin") + (epoll ? "_epoll" : "");
    std::printf("%s,%zu,%.3f,%.3f,%.1f\n", kind.c_str(), size,
                one_way[one_way.size() / 2], avg,
                static_cast<double>(size) / avg / 1.048576);
  }
}

// The frame header the runtime's codec puts before a tensor: a magic, a kind and the payload length
// (hw-native-sys/simpler's remote L3 worker stack; the fields beyond the length do not matter here).
struct FrameHeader {
  uint32_t magic = 0x534d504c;
  uint32_t kind = 1;
  uint64_t len = 0;
  uint64_t tag = 0;
  uint64_t reserved = 0;
};

void recv_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) die("recv");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void frames(const std::vector<size_t>& sizes) {
  for (size_t size : sizes) {
    // At least 256 MiB or 20 frames per size, as rwin-perf caps its iterations.
    const size_t count = std::max<size_t>(20, (size_t{256} << 20) / size);
    int s, c;
    make_pair(&s, &c);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {  // receiver on CPU 1: header, then the payload straight into the tensor
      close(s);
      pin(1);
      std::vector<char> tensor(size);
      for (size_t i = 0; i < count; ++i) {
        FrameHeader h;
        recv_all(c, reinterpret_cast<char*>(&h), sizeof h);
        if (h.magic != 0x534d504c || h.len != size) {
          errno = EPROTO;
          die("frame header");
        }
        recv_all(c, tensor.data(), size);
      }
      const uint64_t ack = count;
      send_all(c, reinterpret_cast<const char*>(&ack), sizeof ack);
      close(c);
      _exit(0);
    }
    close(c);
    pin(0);
    std::vector<char> tensor(size, 't');
    const auto t0 = Clock::now();
    for (size_t i = 0; i < count; ++i) {
      FrameHeader h;
      h.len = size;
      h.tag = i;
      send_all(s, reinterpret_cast<const char*>(&h), sizeof h);
      send_all(s, tensor.data(), size);
    }
    uint64_t ack = 0;
    recv_all(s, reinterpret_cast<char*>(&ack), sizeof ack);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    close(s);
    waitpid(pid, nullptr, 0);
    if (ack != count) {
      errno = EPROTO;
      die("frames ack");
    }
    std::printf("tcp_frames,%zu,,%.3f,%.1f\n", size, us / static_cast<double>(count),
                static_cast<double>(size) * static_cast<double>(count) / us / 1.048576);
  }
}

std::vector<size_t> parse_list(const std::string& list) {
  std::vector<size_t> sizes;
  for (size_t p = 0; p <= list.size();) {
    const size_t q = std::min(list.find(',', p), list.size());
    uint64_t b = 0;
    (void)rwin::bootstrap::parse_size(list.substr(p, q - p), b);  // checked by the option's validator
    sizes.push_back(b);
    p = q + 1;
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rwin_tcp_ref: loopback TCP references (one stream's MiB/s, busy-poll ping-pong one way);\n"
               "CSV lines \"kind,size,p50_us,avg_us,mibs\"",
               "rwin_tcp_ref"};
  rwin::cli::setup(app, RWIN_VERSION_STRING);
  app.require_subcommand(1);
  uint64_t write_bytes = 1 << 20;
  double seconds = 2.0;
  auto* st = app.add_subcommand("stream", "one TCP stream over 127.0.0.1 for SECONDS, WRITE_BYTES per send()");
  st->add_option("WRITE_BYTES", write_bytes, "bytes per send() (default 1M)")
      ->transform(rwin::cli::Size(1, uint64_t{1} << 30))
      ->type_name("SIZE");
  st->add_option("SECONDS", seconds, "how long (default 2)")->transform(rwin::cli::Seconds(0, 3600))->type_name("S");
  std::string list = "8";
  uint64_t iters = 2000;
  auto* pp = app.add_subcommand("pingpong", "SIZE-byte messages bounced with busy-polling recv(MSG_DONTWAIT)");
  const CLI::Validator size_list(
          [](std::string& v) -> std::string {
            for (size_t p = 0; p <= v.size();) {
              const size_t q = std::min(v.find(',', p), v.size());
              uint64_t b = 0;
              const std::string t = v.substr(p, q - p), why = rwin::bootstrap::parse_size(t, b);
              if (!why.empty()) return "'" + t + "' is not a size: " + why + " (want " + rwin::bootstrap::kSizeForm + ")";
              if (b == 0 || b > (uint64_t{1} << 30)) return "'" + t + "' is outside [1, 1G] bytes";
              p = q + 1;
            }
            return {};
          },
          "");
  pp->add_option("SIZES", list, "comma-separated message sizes, K/M suffixes (default 8)")->check(size_list)->type_name("LIST");
  pp->add_option("ITERS", iters, "round trips per size (default 2000)")->transform(rwin::cli::Count(1, INT32_MAX))->type_name("N");
  int sockets = 1;
  pp->add_option("--sockets", sockets,
                 "1: the echo comes back on the same connection; 2: on a second one, each direction on its own "
                 "(as rwin's tcp transport sends requests); CSV kind tcp_pingpong_spin_2sock")
      ->check(CLI::IsMember({1, 2}));
  bool epoll = false;
  pp->add_flag("--epoll", epoll,
               "each side's socket also in an epoll set nobody waits on (as rwin's transport keeps its sockets); "
               "CSV kind ..._epoll");
  std::string frame_list = "4096,1M";
  auto* fr = app.add_subcommand("frames", "the runtime's length-prefixed frames on one socket, COUNT per size, one ack");
  fr->add_option("SIZES", frame_list, "comma-separated frame payload sizes, K/M suffixes (default 4096,1M)")
      ->check(size_list)
      ->type_name("LIST");
  const char* env_cc = std::getenv("RWIN_TCP_CONGESTION");
  std::string congestion = env_cc ? env_cc : "auto";
  app.add_option("--congestion", congestion,
                 "the sockets' congestion control, chosen as rwin's tcp transport chooses RWIN_TCP_CONGESTION: auto, "
                 "system or a name (default: that variable, else auto)")
      ->type_name("CC");
  rwin::cli::parse_or_exit(app, argc, argv);
  try {
    g_congestion = rwin::transport::tcp::resolve_congestion(congestion.c_str());
  } catch (const rwin::transport::TransportError& e) {
    std::fprintf(stderr, "rwin_tcp_ref: %s\n", e.what());
    return 2;
  }
  if (*st) {
    stream(write_bytes, seconds);
    return 0;
  }
  if (*fr) {
    frames(parse_list(frame_list));
    return 0;
  }
  pingpong(parse_list(list), static_cast<int>(iters), sockets, epoll);
  return 0;
}

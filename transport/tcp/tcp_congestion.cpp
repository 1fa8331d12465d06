// The congestion control of rwin's data connections (RWIN_TCP_CONGESTION).
//
// Why rwin picks one: a host whose default is BBR paces every connection at its estimate of the
// path's bandwidth (TCP's internal pacing, with no fq qdisc), and on a path of ~10 us round trips
// whose traffic comes in bursts (a 64 KiB message, then nothing until the answer) that estimate lags:
// between two netns hosts on this VM 1-2 % of the 64 KiB messages of a 2 x 2 all_to_all took 1-4 ms
// to land after their header, against at most 124 us with CUBIC, and the call's average was 2x its
// median (bench/RESULTS.md, "BBR's pacing, and a congestion control of rwin's own"). So by default
// ("auto") a data connection that would get BBR gets CUBIC, where the kernel lets this process set it;
// any other default (cubic, dctcp, ...) is left alone, and so is everything with "system".
#include "transport/tcp/tcp_congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/log.h"
#include "transport/transport.h"

namespace rwin::transport::tcp {
namespace {

std::string proc_line(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s.empty() ? "unknown" : s;
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() >= 16) return false;  // TCP_CA_NAME_MAX, with its NUL
  for (char ch : s) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) return false;
  }
  return true;
}

// setsockopt(TCP_CONGESTION) on a fresh socket: 0, or its errno.
int try_set(const std::string& name) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const int rc = ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size()));
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace

std::string socket_congestion(int fd) {
  char buf[16] = {};
  socklen_t len = sizeof buf;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buf, &len) != 0) return {};
  return std::string(buf, strnlen(buf, std::min<size_t>(len, sizeof buf)));
}

std::string resolve_congestion(const char* knob) {
  const std::string want = knob ? knob : "auto";
  if (want == "system") return {};
  if (want == "auto") {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const std::string current = fd >= 0 ? socket_congestion(fd) : std::string();
    if (fd >= 0) ::close(fd);
    if (current != "bbr") return {};
    if (const int err = try_set("cubic"); err != 0) {
      RWIN_LOG(Info, Core, "tcp: data connections keep the kernel's bbr (cubic: %s; RWIN_TCP_CONGESTION)", std::strerror(err));
      return {};
    }
    return "cubic";
  }
  if (!valid_name(want)) {
    throw TransportError("tcp: RWIN_TCP_CONGESTION is '" + want +
                         "': want auto, system or an algorithm's name (this kernel has: " +
                         proc_line("/proc/sys/net/ipv4/tcp_available_congestion_control") + ")");
  }
  if (const int err = try_set(want); err != 0) {
    const std::string why = err == ENOENT ? "this kernel has no such algorithm (it has: " +
                                                proc_line("/proc/sys/net/ipv4/tcp_available_congestion_control") + ")"
                            : err == EPERM ? std::string("not permitted to this process (without CAP_NET_ADMIN only: ") +
                                                 proc_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control") + ")"
                                           : std::string(std::strerror(err));
    throw TransportError("tcp: RWIN_TCP_CONGESTION is '" + want + "': " + why);
  }
  return want;
}

void tune_data_socket(int fd, const std::string& congestion) noexcept {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // resolve_congestion() set it on a probe socket already: a failure here leaves the kernel's.
  if (!congestion.empty()) {
    ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, congestion.data(), static_cast<socklen_t>(congestion.size()));
  }
}

}  // namespace rwin::transport::tcp

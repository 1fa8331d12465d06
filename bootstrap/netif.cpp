#include "bootstrap/netif.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "bootstrap/bootstrap.h"
#include "bootstrap/parse_number.h"
#include "common/knobs.h"

namespace rwin::bootstrap {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// One owner for the getifaddrs list, so every early return frees it.
struct IfaddrsDeleter {
  void operator()(ifaddrs* p) const noexcept { freeifaddrs(p); }
};
using IfaddrsPtr = std::unique_ptr<ifaddrs, IfaddrsDeleter>;

IfaddrsPtr get_ifaddrs(const std::string& context) {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "bootstrap: " + context + ": getifaddrs failed: " + std::strerror(errno));
  }
  return IfaddrsPtr(raw);
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// "lo 127.0.0.1, eth0 10.0.0.2, ib0 (no ipv4)": every interface name getifaddrs reports, so an
// error message shows what the process could have picked.
std::string describe_interfaces(ifaddrs* list) {
  std::vector<std::string> order;
  std::set<std::string> with_v4;
  std::vector<std::string> parts;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    std::string name = it->ifa_name ? it->ifa_name : "";
    bool seen = false;
    for (const auto& n : order) seen = seen || n == name;
    if (!seen) order.push_back(name);
    if (it->ifa_addr && it->ifa_addr->sa_family == AF_INET) {
      char buf[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof buf);
      parts.push_back(name + " " + buf);
      with_v4.insert(name);
    }
  }
  for (const auto& n : order) {
    if (!with_v4.count(n)) parts.push_back(n + " (no ipv4)");
  }
  if (parts.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

// `what` is the question being answered, e.g. "choosing the interface to reach root 'h1'".
[[noreturn]] void fail_doing(const std::string& what, const std::string& reason) {
  std::string seen;
  try {
    seen = describe_interfaces(get_ifaddrs("listing interfaces").get());
  } catch (const BootstrapError& e) {
    seen = std::string("unknown (") + e.what() + ")";
  }
  throw BootstrapError(BootstrapError::Kind::Config,
                       "bootstrap: " + what + ": " + reason + " (interfaces seen: " + seen + ")");
}

[[noreturn]] void fail(const std::string& root_host, const std::string& reason) {
  fail_doing("choosing the interface to reach root '" + root_host + "'", reason);
}

// Resolves root_host to one IPv4 address. AF_INET only: the bootstrap speaks IPv4.
bool resolve_ipv4(const std::string& host, in_addr& out, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    why = std::string("cannot resolve it to an ipv4 address: ") + gai_strerror(rc);
    return false;
  }
  out = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

// Strict (parse_number.h): a job id with a sign, spaces or junk derives no port.
bool parse_ull(const std::string& s, unsigned long long& out) {
  uint64_t v = 0;
  if (!parse_u64(s, v).empty()) return false;
  out = v;
  return true;
}

// Open MPI 4.x (ORTE) URIs look like "1706754048.0;tcp://127.0.0.1,10.0.0.5:39121;tcp6://[::1]:39122":
// the first field is the process name, then one entry per transport with a comma-separated address
// list and the port. We take the first address of the first tcp:// entry.
std::string host_from_ompi_uri(const std::string& uri) {
  const std::string tag = "tcp://";
  size_t p = uri.find(tag);
  if (p == std::string::npos) return {};
  p += tag.size();
  size_t end = uri.find_first_of(",:;", p);
  std::string host = uri.substr(p, end == std::string::npos ? std::string::npos : end - p);
  in_addr probe{};
  if (inet_pton(AF_INET, host.c_str(), &probe) != 1) return {};
  return host;
}

std::optional<LauncherRoot> derive_openmpi() {
  if (env_or_empty("OMPI_COMM_WORLD_SIZE").empty()) return std::nullopt;
  std::string hnp = env_or_empty("OMPI_MCA_orte_hnp_uri");
  std::string host = host_from_ompi_uri(hnp);
  unsigned long long jobid = 0;
  if (host.empty() || !parse_ull(env_or_empty("OMPI_MCA_ess_base_jobid"), jobid)) return std::nullopt;
  LauncherRoot r;
  r.root = host + ":" + std::to_string(derived_port(jobid));
  r.source = "openmpi";
  r.how = "host from OMPI_MCA_orte_hnp_uri (mpirun's address), port from OMPI_MCA_ess_base_jobid=" +
          std::to_string(jobid);
  // The local daemon of a process on mpirun's node is mpirun itself, so both URIs are equal there.
  std::string local = env_or_empty("OMPI_MCA_orte_local_daemon_uri");
  if (!local.empty()) r.on_root_host = (local == hnp);
  return r;
}

std::optional<LauncherRoot> derive_slurm() {
  if (env_or_empty("SLURM_PROCID").empty()) return std::nullopt;
  std::string list_var;
  std::string list;
  for (const char* v : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    list = env_or_empty(v);
    if (!list.empty()) {
      list_var = v;
      break;
    }
  }
  std::string host = first_host_of_hostlist(list);
  unsigned long long job = 0;
  unsigned long long step = 0;
  if (host.empty() || !parse_ull(env_or_empty("SLURM_JOB_ID"), job)) return std::nullopt;
  // A batch script's own step has SLURM_STEP_ID unset or "batch"; treat anything non-numeric as 0.
  if (!parse_ull(env_or_empty("SLURM_STEP_ID"), step)) step = 0;
  LauncherRoot r;
  r.root = host + ":" + std::to_string(derived_port(job * 1000 + step % 1000));
  r.source = "slurm";
  r.how = "host = first node of " + list_var + ", port from SLURM_JOB_ID=" + std::to_string(job) +
          " and SLURM_STEP_ID=" + std::to_string(step);
  std::string me = env_or_empty("SLURMD_NODENAME");
  if (!me.empty()) r.on_root_host = (me == host);
  return r;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> list_ipv4_interfaces() {
  auto list = get_ifaddrs("listing ipv4 interfaces");
  std::vector<std::pair<std::string, std::string>> out;
  for (ifaddrs* it = list.get(); it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || !it->ifa_name) continue;
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof buf);
    out.emplace_back(it->ifa_name, buf);
  }
  return out;
}

std::string choose_interface(const std::string& root_host) {
  const char* asked = knobs::env("RWIN_IFNAME");
  const std::string forced = asked ? asked : "";
  if (!forced.empty()) {
    for (const auto& [name, addr] : list_ipv4_interfaces()) {
      if (name == forced) return name;
    }
    // Say which of the two it is: a typo'd name and an interface without an address need
    // different fixes.
    bool exists = if_nametoindex(forced.c_str()) != 0;
    fail(root_host, "RWIN_IFNAME=" + forced +
                        (exists ? " exists but has no ipv4 address" : " names no interface on this host"));
  }
  if (root_host.empty()) fail(root_host, "the root host is empty");

  in_addr dest{};
  std::string why;
  if (!resolve_ipv4(root_host, dest, why)) fail(root_host, why);

  Fd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.fd < 0) fail(root_host, std::string("socket(udp) failed: ") + std::strerror(errno));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr = dest;
  // Any port will do: connect() on a datagram socket only selects the route and source address,
  // no packet leaves the host. 9 is the discard port, in case a packet ever did.
  to.sin_port = htons(9);
  if (::connect(sock.fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    fail(root_host, std::string("no route to it: connect(udp) failed: ") + std::strerror(errno));
  }
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (::getsockname(sock.fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    fail(root_host, std::string("getsockname failed: ") + std::strerror(errno));
  }
  char local_text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &local.sin_addr, local_text, sizeof local_text);

  auto list = get_ifaddrs("choosing the interface to reach root '" + root_host + "'");
  for (ifaddrs* it = list.get(); it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || !it->ifa_name) continue;
    if (reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr == local.sin_addr.s_addr) {
      return it->ifa_name;
    }
  }
  fail(root_host, std::string("the route to it uses source address ") + local_text +
                      ", which no interface owns");
}

namespace {

constexpr const char* kServeWhat = "choosing the address other hosts reach the store on";

bool is_loopback_v4(const std::string& dotted) { return dotted.rfind("127.", 0) == 0; }

// The first IPv4 address of interface `name`, or "" if it has none.
std::string ipv4_of(const std::string& name) {
  for (const auto& [ifname, addr] : list_ipv4_interfaces()) {
    if (ifname == name) return addr;
  }
  return {};
}

// The interface of the default route (destination 0.0.0.0/0 in /proc/net/route), or "".
std::string default_route_interface() {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen("/proc/net/route", "re"), &std::fclose);
  if (!f) return {};
  char line[512];
  if (!std::fgets(line, sizeof line, f.get())) return {};  // the header
  while (std::fgets(line, sizeof line, f.get())) {
    char iface[64] = {};
    char dest[16] = {};
    char mask[16] = {};
    // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
    if (std::sscanf(line, "%63s %15s %*s %*s %*s %*s %*s %15s", iface, dest, mask) != 3) continue;
    if (std::strcmp(dest, "00000000") == 0 && std::strcmp(mask, "00000000") == 0) return iface;
  }
  return {};
}

}  // namespace

std::string choose_serve_address(const std::string& peer_host, std::string& how) {
  std::vector<std::string> tried;
  const char* ifname_knob = knobs::env("RWIN_IFNAME");
  const std::string forced = ifname_knob ? ifname_knob : "";
  if (!forced.empty()) {
    const std::string addr = ipv4_of(forced);
    if (addr.empty()) fail_doing(kServeWhat, "RWIN_IFNAME=" + forced + " is no interface with an ipv4 address on this host");
    how = "the address of RWIN_IFNAME=" + forced;
    return addr;
  }
  if (!peer_host.empty()) {
    try {
      const std::string ifname = choose_interface(peer_host);
      const std::string addr = ipv4_of(ifname);
      if (!addr.empty() && !is_loopback_v4(addr)) {
        how = "the address of " + ifname + ", the interface that routes to " + peer_host + " (a host of other ranks)";
        return addr;
      }
      tried.push_back("the route to " + peer_host + " uses " + ifname + " (loopback)");
    } catch (const BootstrapError& e) {
      tried.push_back(std::string("routing to ") + peer_host + ": " + e.what());
    }
  }
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') {
    in_addr a{};
    std::string why;
    if (resolve_ipv4(name, a, why)) {
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &a, text, sizeof text);
      bool owned = false;
      for (const auto& [ifname, addr] : list_ipv4_interfaces()) owned = owned || addr == text;
      if (owned && !is_loopback_v4(text)) {
        how = std::string("the address this host's name '") + name + "' resolves to";
        return text;
      }
      tried.push_back(std::string("host name '") + name + "' resolves to " + text +
                      (owned ? " (loopback)" : " (no interface here owns it)"));
    } else {
      tried.push_back(std::string("host name '") + name + "': " + why);
    }
  }
  const std::string def = default_route_interface();
  if (!def.empty()) {
    const std::string addr = ipv4_of(def);
    if (!addr.empty() && !is_loopback_v4(addr)) {
      how = "the address of " + def + ", the default route's interface";
      return addr;
    }
    tried.push_back("the default route's interface " + def + " has no usable ipv4 address");
  } else {
    tried.push_back("no default route");
  }
  std::string all;
  for (size_t i = 0; i < tried.size(); ++i) all += (i ? "; " : "") + tried[i];
  fail_doing(kServeWhat, "no address other hosts can reach was found (" + all +
                                        "): set RWIN_IFNAME to the interface that reaches the other hosts");
}

unsigned derived_port(unsigned long long job_id) { return 20000u + static_cast<unsigned>(job_id % 12000u); }

std::string first_host_of_hostlist(const std::string& hostlist) {
  // The first element ends at the first comma outside brackets; inside it, each "[..]" range list
  // stands for its first value, written as given so zero padding ("[007-010]") is kept.
  std::string out;
  size_t i = 0;
  while (i < hostlist.size() && hostlist[i] != ',') {
    char c = hostlist[i];
    if (c == ']') return {};
    if (c != '[') {
      out += c;
      ++i;
      continue;
    }
    size_t close = hostlist.find(']', i);
    if (close == std::string::npos) return {};
    std::string first;
    for (size_t j = i + 1; j < close && hostlist[j] != ',' && hostlist[j] != '-'; ++j) {
      if (hostlist[j] < '0' || hostlist[j] > '9') return {};
      first += hostlist[j];
    }
    if (first.empty()) return {};
    out += first;
    i = close + 1;
  }
  return out;
}

std::optional<LauncherRoot> derive_launcher_root() {
  // Open MPI first, matching LaunchEnv::detect's order (an mpirun inside a Slurm allocation sees
  // both sets of variables, and its ranks are numbered by Open MPI).
  // When Open MPI's variables are there but unusable we stop rather than fall through to Slurm's:
  // under mpirun the ranks are Open MPI's, and Slurm's task 0 need not be rank 0.
  try {
    if (!env_or_empty("OMPI_COMM_WORLD_SIZE").empty()) return derive_openmpi();
    return derive_slurm();
  } catch (...) {
    // Only std::bad_alloc can get here; the caller treats "no derivation" as "ask the user".
    return std::nullopt;
  }
}

std::optional<std::string> derive_root_from_launcher() {
  auto r = derive_launcher_root();
  if (!r) return std::nullopt;
  return r->root;
}

}  // namespace rwin::bootstrap

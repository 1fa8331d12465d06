// Device discovery: device, port and GID selection (TransportConfig::ib_device/ib_port/gid_index).
#include "transport/verbs/verbs_device.h"

#include <arpa/inet.h>
#include <sched.h>

#include <algorithm>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"
#include "transport/verbs/verbs_transport.h"

namespace rwin::transport::verbs {
namespace {

const char* port_state_text(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_ACTIVE:
      return "active";
    case IBV_PORT_DOWN:
      return "down";
    case IBV_PORT_INIT:
      return "init";
    case IBV_PORT_ARMED:
      return "armed";
    case IBV_PORT_ACTIVE_DEFER:
      return "active_defer";
    default:
      return "nop";
  }
}

bool gid_is_zero(const ibv_gid& g) {
  for (uint8_t b : g.raw) {
    if (b != 0) return false;
  }
  return true;
}

// ::ffff:a.b.c.d, the form RoCE v2 uses for an IPv4 address (routable over UDP/IPv4).
bool gid_is_ipv4_mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i) {
    if (g.raw[i] != 0) return false;
  }
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

struct GidCandidate {
  int index = -1;
  ibv_gid gid{};
  int type = -1;  // enum ibv_gid_type, -1 unknown
};

// Reads the GID type from sysfs ("RoCE v2", "IB/RoCE v1"), the fallback when the kernel does not
// answer ibv_query_gid_ex (pre-5.x kernels).
int sysfs_gid_type(const std::string& dev, int port, int index) {
  std::ifstream f("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/types/" +
                  std::to_string(index));
  std::string line;
  if (!f || !std::getline(f, line)) return -1;
  if (line.find("v2") != std::string::npos) return IBV_GID_TYPE_ROCE_V2;
  if (line.find("RoCE") != std::string::npos) return IBV_GID_TYPE_ROCE_V1;
  return IBV_GID_TYPE_IB;
}

std::vector<GidCandidate> list_gids(ibv_context* ctx, const std::string& dev, int port, int tbl_len, int nports) {
  std::vector<GidCandidate> out;
  // ibv_query_gid_table returns only valid entries in one call; the GID table of rxe has 1024 slots.
  std::vector<ibv_gid_entry> entries(static_cast<size_t>(tbl_len) * static_cast<size_t>(nports) + 1);
  const ssize_t n = ibv_query_gid_table(ctx, entries.data(), entries.size(), 0);
  if (n >= 0) {
    for (ssize_t i = 0; i < n; ++i) {
      if (static_cast<int>(entries[i].port_num) != port) continue;
      out.push_back({static_cast<int>(entries[i].gid_index), entries[i].gid, static_cast<int>(entries[i].gid_type)});
    }
    return out;
  }
  for (int i = 0; i < tbl_len; ++i) {
    GidCandidate c;
    c.index = i;
    if (ibv_query_gid(ctx, static_cast<uint8_t>(port), i, &c.gid) != 0 || gid_is_zero(c.gid)) continue;
    c.type = sysfs_gid_type(dev, port, i);
    out.push_back(c);
  }
  return out;
}

const char* gid_type_text(int type, const ibv_gid& g) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V2:
      return gid_is_ipv4_mapped(g) ? "roce v2 ipv4" : "roce v2";
    case IBV_GID_TYPE_ROCE_V1:
      return "roce v1";
    case IBV_GID_TYPE_IB:
      return "ib";
    default:
      return "unknown type";
  }
}

bool type_ok(GidType want, GidType have) { return want == GidType::Auto || want == have; }

// "1:roce-v2:::ffff:10.0.2.15, 0:roce-v1:fe80::..." (at most 8), for messages.
std::string gids_seen(const std::vector<GidCandidate>& gids, bool roce) {
  std::string s;
  int n = 0;
  for (const auto& g : gids) {
    if (gid_is_zero(g.gid)) continue;
    if (n++ == 8) return s + ", ...";
    s += (s.empty() ? "" : ", ") + std::to_string(g.index) + ":" + gid_type_name(gid_type_code(g.type, roce)) + ":" +
         gid_text(g.gid);
  }
  return s.empty() ? "none" : s;
}

void choose_gid(ibv_context* ctx, const TransportConfig& cfg, DeviceChoice& c) {
  const int tbl_len = c.port_attr.gid_tbl_len;
  const GidType want = cfg.verbs.gid_type;
  const GidSubnet& subnet = cfg.verbs.gid_subnet;
  const std::string where = c.name + " port " + std::to_string(c.port);
  if (cfg.gid_index >= 0) {
    if (cfg.gid_index >= tbl_len) {
      throw TransportError("verbs: gid index " + std::to_string(cfg.gid_index) + " out of range for " + where +
                           " (gid table has " + std::to_string(tbl_len) + " entries)");
    }
    if (ibv_query_gid(ctx, static_cast<uint8_t>(c.port), cfg.gid_index, &c.gid) != 0 || gid_is_zero(c.gid)) {
      throw TransportError("verbs: gid index " + std::to_string(cfg.gid_index) + " of " + where +
                           " is empty (ibv_query_gid: " + std::strerror(errno) + "); see `ibv_devinfo -v -d " +
                           c.name + "`");
    }
    c.gid_index = cfg.gid_index;
    ibv_gid_entry e{};
    int type = -1;
    if (ibv_query_gid_ex(ctx, c.port, c.gid_index, &e, 0) == 0)
      type = static_cast<int>(e.gid_type);
    else
      type = sysfs_gid_type(c.name, c.port, c.gid_index);
    c.gid_kind = gid_type_text(type, c.gid);
    c.gid_type = gid_type_code(type, c.roce);
    // An index and a filter that disagree: say so rather than quietly ignore one of them.
    if (!type_ok(want, c.gid_type)) {
      throw TransportError("verbs: RWIN_GID_INDEX=" + std::to_string(cfg.gid_index) + " of " + where + " is a " +
                           gid_type_name(c.gid_type) + " GID (" + gid_text(c.gid) + "), RWIN_IB_GID_TYPE asks for " +
                           gid_type_name(want));
    }
    if (!subnet.matches(c.gid.raw)) {
      throw TransportError("verbs: RWIN_GID_INDEX=" + std::to_string(cfg.gid_index) + " of " + where + " is " +
                           gid_text(c.gid) + ", outside RWIN_IB_GID_SUBNET=" + subnet.text);
    }
    return;
  }
  const auto gids = list_gids(ctx, c.name, c.port, tbl_len, c.dev_attr.phys_port_cnt);
  std::vector<const GidCandidate*> ok;  // passes RWIN_IB_GID_TYPE and RWIN_IB_GID_SUBNET, in table order
  for (const auto& g : gids) {
    if (!gid_is_zero(g.gid) && type_ok(want, gid_type_code(g.type, c.roce)) && subnet.matches(g.gid.raw)) {
      ok.push_back(&g);
    }
  }
  const GidCandidate* pick = nullptr;
  // On RoCE (or when RoCE v2 is asked for): a RoCE v2 IPv4-mapped GID, routable and what rxe and
  // most fabrics are set up for; then any RoCE v2; then anything left (RoCE v1 works only inside one
  // L2 domain).
  for (int pass = 0; pass < 3 && !pick; ++pass) {
    for (const GidCandidate* g : ok) {
      const bool v2 = g->type == IBV_GID_TYPE_ROCE_V2;
      if ((pass == 0 && c.roce && v2 && gid_is_ipv4_mapped(g->gid)) || (pass == 1 && c.roce && v2) || pass == 2) {
        pick = g;
        break;
      }
    }
  }
  if (!pick) {
    const bool filtered = want != GidType::Auto || subnet.set;
    throw TransportError(
        "verbs: " + where + " has no usable gid" +
        (filtered ? std::string(" with RWIN_IB_GID_TYPE=") + gid_type_name(want) +
                        (subnet.set ? " and RWIN_IB_GID_SUBNET=" + subnet.text : std::string()) + " (gids: " +
                        gids_seen(gids, c.roce) + ")"
                  : std::string(" (gid table empty: is the netdev up and does it have an address?)")) +
        "; set RWIN_GID_INDEX or see `ibv_devinfo -v -d " + c.name + "`");
  }
  c.gid_index = pick->index;
  c.gid = pick->gid;
  c.gid_kind = gid_type_text(pick->type, pick->gid);
  c.gid_type = gid_type_code(pick->type, c.roce);
}

}  // namespace

std::string gid_text(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(AF_INET6, gid.raw, buf, sizeof buf)) return "?";
  return buf;
}

GidType gid_type_code(int ibv_gid_type, bool roce) noexcept {
  switch (ibv_gid_type) {
    case IBV_GID_TYPE_ROCE_V2: return GidType::RoceV2;
    case IBV_GID_TYPE_ROCE_V1: return GidType::RoceV1;
    case IBV_GID_TYPE_IB: return roce ? GidType::RoceV1 : GidType::Ib;
    default: return GidType::Auto;  // unknown
  }
}

const char* fork_status_text() {
  switch (ibv_is_fork_initialized()) {
    case IBV_FORK_UNNEEDED: return "unneeded (the kernel copies pinned pages on fork)";
    case IBV_FORK_ENABLED: return "enabled (ibv_fork_init)";
    case IBV_FORK_DISABLED: return "disabled";
  }
  return "?";
}

std::string fork_safety(ForkSafe mode) {
  // ibv_fork_init() is not thread safe; transports may be made on several threads (agents).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  // ibv_fork_init() returns at once where the kernel copies pinned pages (unless RDMAV_USE_MADVISE
  // asks for madvise anyway) and where it ran before.
  // auto: nothing where the kernel copies pinned pages into a child (>= 5.13). ibv_fork_init() would
  // still mark registered pages MADV_DONTFORK there (rdma-core 44, seen in the guest), so a forked
  // child lost those pages and the heap around them (tests/python/test_process.py crashed in CI).
  if (mode == ForkSafe::Auto && ibv_is_fork_initialized() == IBV_FORK_UNNEEDED) return fork_status_text();
  if (mode != ForkSafe::Off) {
    if (int rc = ibv_fork_init(); rc != 0) {
      const std::string why = std::string("ibv_fork_init failed: ") + std::strerror(rc) +
                              (rc == EINVAL ? " (this process registered memory before its first verbs transport)" : "");
      if (mode == ForkSafe::On) {
        throw TransportError("verbs: RWIN_IB_FORK_SAFE=1: " + why +
                             "; set RDMAV_FORK_SAFE=1 in the environment (libibverbs then initialises fork support "
                             "at its first call) or make the transport before registering memory");
      }
      static bool warned = false;
      if (!warned) {
        warned = true;
        RWIN_LOG(Warn, Verbs, "verbs: fork safety: %s; registered memory of this process may be corrupted if it forks "
                              "and writes to it (RWIN_IB_FORK_SAFE=1 makes this an error)", why.c_str());
      }
    }
  }
  return fork_status_text();
}

void fill_path(ibv_ah_attr& ah, const DeviceChoice& c, const VerbsParams& p, const uint8_t remote_gid[16],
               uint16_t remote_lid) {
  ah.dlid = remote_lid;
  ah.sl = p.service_level;
  ah.src_path_bits = 0;
  ah.port_num = static_cast<uint8_t>(c.port);
  // RoCE has no LIDs: every packet carries a GRH, addressed by GID, sent from our chosen GID (for
  // RoCE v2 the GID index also selects the UDP/IP encapsulation, and the traffic class becomes the
  // IP header's DSCP and ECN bits). On IB a GRH is needed only across subnets, i.e. when the peer
  // has no LID we can route to.
  if (c.roce || remote_lid == 0) {
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, remote_gid, 16);
    ah.grh.sgid_index = static_cast<uint8_t>(c.gid_index);
    ah.grh.hop_limit = p.hop_limit;
    ah.grh.traffic_class = p.traffic_class;
    ah.grh.flow_label = 0;
  }
}

ContextPtr open_device(const TransportConfig& cfg, DeviceChoice& choice) {
  fork_safety(cfg.verbs.fork_safe);  // before this process's first device, PD or registration
  int n = 0;
  errno = 0;
  DeviceListPtr list(ibv_get_device_list(&n));
  if (!list || n == 0) {
    std::string why = !list && errno ? std::string(" (") + std::strerror(errno) + ")" : "";
    throw TransportError("verbs: no rdma devices found (ibv_get_device_list returned 0 devices" + why +
                         "): load rdma_rxe or use RWIN_TRANSPORT=ucx");
  }
  const int port = cfg.ib_port;
  std::string seen;  // "rxe0 port 1 down, mlx5_0 port 1 active"
  auto note = [&seen](const std::string& s) { seen += (seen.empty() ? "" : ", ") + s; };
  for (int i = 0; i < n; ++i) {
    const std::string name = ibv_get_device_name(list.get()[i]);
    if (!cfg.ib_device.empty() && name != cfg.ib_device) {
      note(name + " (not requested)");
      continue;
    }
    ContextPtr ctx(ibv_open_device(list.get()[i]));
    if (!ctx) {
      note(name + " (ibv_open_device: " + std::strerror(errno) + ")");
      continue;
    }
    DeviceChoice c;
    c.name = name;
    c.port = port;
    if (int rc = ibv_query_device(ctx.get(), &c.dev_attr); rc != 0) {
      note(name + " (ibv_query_device: " + std::strerror(rc) + ")");
      continue;
    }
    if (port < 1 || port > c.dev_attr.phys_port_cnt) {
      note(name + " (has ports 1.." + std::to_string(c.dev_attr.phys_port_cnt) + ", not " + std::to_string(port) + ")");
      continue;
    }
    if (int rc = ibv_query_port(ctx.get(), static_cast<uint8_t>(port), &c.port_attr); rc != 0) {
      note(name + " port " + std::to_string(port) + " (ibv_query_port: " + std::strerror(rc) + ")");
      continue;
    }
    if (c.port_attr.state != IBV_PORT_ACTIVE) {
      note(name + " port " + std::to_string(port) + " " + port_state_text(c.port_attr.state));
      continue;
    }
    if (c.dev_attr.atomic_cap == IBV_ATOMIC_NONE) {
      note(name + " port " + std::to_string(port) + " active but without atomics (atomic_cap none)");
      continue;
    }
    c.roce = c.port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    choose_gid(ctx.get(), cfg, c);
    choice = c;
    return ctx;
  }
  throw TransportError("verbs: no usable rdma device (wanted " +
                       (cfg.ib_device.empty() ? std::string("any device") : cfg.ib_device) + " with port " +
                       std::to_string(port) + " active and atomics); found: " + seen);
}

int device_numa_node(const std::string& name) {
  std::ifstream f("/sys/class/infiniband/" + name + "/device/numa_node");
  int node = -1;
  if (!(f >> node)) return -1;
  return node;
}

std::vector<OpenedDevice> open_devices(const TransportConfig& cfg) {
  const HcaList& hca = cfg.verbs.hca;
  std::vector<OpenedDevice> out;
  auto open_named = [&cfg](const std::string& name, int port) {
    TransportConfig one = cfg;
    one.ib_device = name;
    if (port > 0) one.ib_port = port;
    OpenedDevice d;
    d.ctx = open_device(one, d.choice);
    return d;
  };
  std::vector<std::string> names;
  {
    int n = 0;
    DeviceListPtr list(ibv_get_device_list(&n));
    for (int i = 0; list && i < n; ++i) names.emplace_back(ibv_get_device_name(list.get()[i]));
  }
  if (!hca.set) {
    if (!cfg.ib_device.empty() || names.size() < 2) {
      out.push_back(open_named(cfg.ib_device, 0));
      return out;
    }
    // NUMA locality: a device on this thread's node first, then the others in the kernel's order.
    unsigned cpu = 0, node = 0;
    const int here = getcpu(&cpu, &node) == 0 ? static_cast<int>(node) : -1;
    std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
      return (here >= 0 && device_numa_node(a) == here) > (here >= 0 && device_numa_node(b) == here);
    });
    for (const std::string& name : names) {
      try {
        out.push_back(open_named(name, 0));
        if (device_numa_node(name) >= 0) {
          RWIN_LOG(Debug, Verbs, "verbs: %s is on NUMA node %d, this thread on %d", name.c_str(),
                   device_numa_node(name), here);
        }
        return out;
      } catch (const TransportError&) {  // not usable: the next one
      }
    }
    out.push_back(open_named("", 0));  // throws the full list of what was seen
    return out;
  }
  if (!cfg.ib_device.empty()) {
    throw TransportError("verbs: RWIN_IB_DEVICE=" + cfg.ib_device + " and RWIN_IB_HCA=" + hca.text +
                         " are both set: RWIN_IB_HCA lists the devices, unset one of them");
  }
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  if (hca.exclude) {
    for (const std::string& name : names) {
      bool excluded = false;
      for (const auto& e : hca.entries) excluded = excluded || hca.matches(e, name);
      if (excluded) continue;
      try {
        out.push_back(open_named(name, 0));
      } catch (const TransportError& e) {
        RWIN_LOG(Info, Verbs, "verbs: RWIN_IB_HCA=%s: %s not used: %s", hca.text.c_str(), name.c_str(), e.what());
      }
      if (out.size() == static_cast<size_t>(verbs_const::kMaxRails)) break;
    }
    if (out.empty()) {
      throw TransportError("verbs: RWIN_IB_HCA=" + hca.text + " leaves no usable device (devices: " +
                           (all.empty() ? "none" : all) + ")");
    }
    return out;
  }
  for (const auto& e : hca.entries) {
    bool found = false;
    for (const std::string& name : names) {
      if (!hca.matches(e, name)) continue;
      const bool taken = std::any_of(out.begin(), out.end(), [&](const OpenedDevice& d) {
        return d.choice.name == name && d.choice.port == (e.port > 0 ? e.port : cfg.ib_port);
      });
      if (taken) continue;
      found = true;
      if (out.size() == static_cast<size_t>(verbs_const::kMaxRails)) {
        throw TransportError("verbs: RWIN_IB_HCA=" + hca.text + " matches more than " +
                             std::to_string(verbs_const::kMaxRails) + " devices (devices: " + all + ")");
      }
      try {
        out.push_back(open_named(name, e.port));
      } catch (const TransportError& err) {
        throw TransportError("verbs: RWIN_IB_HCA=" + hca.text + ": " + name + " cannot be used: " + err.what());
      }
    }
    if (!found) {
      throw TransportError("verbs: RWIN_IB_HCA=" + hca.text + ": no device " + (hca.exact ? "named " : "starting with ") +
                           e.name + " (devices: " + (all.empty() ? "none" : all) + ")");
    }
  }
  return out;
}

}  // namespace rwin::transport::verbs

namespace rwin::transport {

int verbs_device_count() noexcept {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return 0;
  ibv_free_device_list(list);
  return n;
}

}  // namespace rwin::transport

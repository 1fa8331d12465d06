// Device discovery: device, port and GID selection (TransportConfig::ib_device/ib_port/gid_index).
#include "transport/verbs/verbs_device.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

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

void choose_gid(ibv_context* ctx, const TransportConfig& cfg, DeviceChoice& c) {
  const int tbl_len = c.port_attr.gid_tbl_len;
  if (cfg.gid_index >= 0) {
    if (cfg.gid_index >= tbl_len) {
      throw TransportError("verbs: gid index " + std::to_string(cfg.gid_index) + " out of range for " + c.name +
                           " port " + std::to_string(c.port) + " (gid table has " + std::to_string(tbl_len) +
                           " entries)");
    }
    if (ibv_query_gid(ctx, static_cast<uint8_t>(c.port), cfg.gid_index, &c.gid) != 0 || gid_is_zero(c.gid)) {
      throw TransportError("verbs: gid index " + std::to_string(cfg.gid_index) + " of " + c.name + " port " +
                           std::to_string(c.port) + " is empty (ibv_query_gid: " + std::strerror(errno) +
                           "); see `ibv_devinfo -v -d " + c.name + "`");
    }
    c.gid_index = cfg.gid_index;
    ibv_gid_entry e{};
    int type = -1;
    if (ibv_query_gid_ex(ctx, c.port, c.gid_index, &e, 0) == 0)
      type = static_cast<int>(e.gid_type);
    else
      type = sysfs_gid_type(c.name, c.port, c.gid_index);
    c.gid_kind = gid_type_text(type, c.gid);
    return;
  }
  const auto gids = list_gids(ctx, c.name, c.port, tbl_len, c.dev_attr.phys_port_cnt);
  const GidCandidate* pick = nullptr;
  if (c.roce) {
    // RoCE v2 with an IPv4-mapped address: routable, and what rxe and most fabrics are set up for.
    // Then any RoCE v2, then anything non-zero (RoCE v1 works only inside one L2 domain).
    for (const auto& g : gids) {
      if (g.type == IBV_GID_TYPE_ROCE_V2 && gid_is_ipv4_mapped(g.gid)) {
        pick = &g;
        break;
      }
    }
    if (!pick) {
      for (const auto& g : gids) {
        if (g.type == IBV_GID_TYPE_ROCE_V2 && !gid_is_zero(g.gid)) {
          pick = &g;
          break;
        }
      }
    }
  }
  if (!pick) {
    for (const auto& g : gids) {
      if (!gid_is_zero(g.gid)) {
        pick = &g;
        break;
      }
    }
  }
  if (!pick) {
    throw TransportError("verbs: " + c.name + " port " + std::to_string(c.port) +
                         " has no usable gid (gid table empty: is the netdev up and does it have an "
                         "address?); set RWIN_GID_INDEX or see `ibv_devinfo -v -d " +
                         c.name + "`");
  }
  c.gid_index = pick->index;
  c.gid = pick->gid;
  c.gid_kind = gid_type_text(pick->type, pick->gid);
}

}  // namespace

std::string gid_text(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(AF_INET6, gid.raw, buf, sizeof buf)) return "?";
  return buf;
}

ContextPtr open_device(const TransportConfig& cfg, DeviceChoice& choice) {
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

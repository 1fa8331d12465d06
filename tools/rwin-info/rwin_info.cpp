// rwin-info: what this rwin is and what it would use here, as ucx_info / ibv_devinfo do for theirs.
//
//   rwin-info [-c] [-d] [--json]
//
// Sections: version and build options; transports compiled in; UCX version, resources (component,
// memory domain, transport, device) and the RMA mode each kind of peer gets with the current
// settings; verbs devices, ports, GIDs, MTU, max_msg_sz, atomic capability; every RWIN_* knob with
// its value and source (common/knobs.h). -c: the configuration only; -d: the devices only.
#if RWIN_INFO_HAVE_VERBS
#include <infiniband/verbs.h>

#include "transport/verbs/verbs_device.h"
#endif
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectives/team_state.h"
#include "common/knobs.h"
#include "common/page_alloc.h"
#include "common/parse_number.h"
#include "common/log.h"
#include "rwin/rwin.h"
#include "rwin/version.h"
#include "transport/tcp/tcp_congestion.h"
#include "transport/transport.h"
#include "tools/cli.h"

namespace {

using nlohmann::json;

json build_info() {
  return {{"build_type", RWIN_INFO_BUILD_TYPE},
          {"sanitizers", RWIN_INFO_SANITIZE},
          {"compiler", RWIN_INFO_COMPILER},
          {"verbs", RWIN_INFO_HAVE_VERBS != 0}};
}

json transports() {
  json t = json::array({"ucx", "tcp", "mixed"});  // tcp: rwin's own sockets, always built (docs/TCP.md)
  if (RWIN_INFO_HAVE_VERBS) t.push_back("verbs");
  return t;
}

bool have_rdma_devices() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/sys/class/infiniband", ec);
  return !ec && it != std::filesystem::directory_iterator();
}

const char* dev_type(uct_device_type_t t) {
  switch (t) {
    case UCT_DEVICE_TYPE_NET: return "net";
    case UCT_DEVICE_TYPE_SHM: return "shm";
    case UCT_DEVICE_TYPE_ACC: return "acc";
    case UCT_DEVICE_TYPE_SELF: return "self";
    default: return "?";
  }
}

// Every transport resource UCX offers on this host (uct: components -> memory domains -> tls).
json ucx_resources() {
  json out = json::array();
  uct_component_h* comps = nullptr;
  unsigned ncomps = 0;
  if (uct_query_components(&comps, &ncomps) != UCS_OK) return out;
  for (unsigned c = 0; c < ncomps; ++c) {
    uct_component_attr_t ca{};
    ca.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(comps[c], &ca) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> mds(ca.md_resource_count);
    ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    ca.md_resources = mds.data();
    if (uct_component_query(comps[c], &ca) != UCS_OK) continue;
    for (const auto& md_res : mds) {
      uct_md_config_t* cfg = nullptr;
      if (uct_md_config_read(comps[c], nullptr, nullptr, &cfg) != UCS_OK) continue;
      uct_md_h md = nullptr;
      const ucs_status_t s = uct_md_open(comps[c], md_res.md_name, cfg, &md);
      uct_config_release(cfg);
      if (s != UCS_OK) continue;
      uct_tl_resource_desc_t* tls = nullptr;
      unsigned ntls = 0;
      if (uct_md_query_tl_resources(md, &tls, &ntls) == UCS_OK) {
        for (unsigned t = 0; t < ntls; ++t) {
          out.push_back({{"component", ca.name},
                         {"md", md_res.md_name},
                         {"transport", tls[t].tl_name},
                         {"device", tls[t].dev_name},
                         {"type", dev_type(tls[t].dev_type)}});
        }
        uct_release_tl_resource_list(tls);
      }
      uct_md_close(md);
    }
  }
  uct_release_component_list(comps);
  return out;
}

bool tls_allow(const std::string& tls, std::initializer_list<const char*> names) {
  if (tls.empty() || tls == "all") return true;
  for (const char* n : names) {
    if (tls.find(n) != std::string::npos) return true;
  }
  return false;
}

// The mode each kind of peer gets (transport/ucx/ucx_connect.cpp, choose_am) with the current
// RWIN_UCX_RMA and UCX_TLS: direct where UCX maps the peer's memory (shared memory on this host),
// am where UCX could only emulate RMA (tcp, no RDMA device), native otherwise.
json rma_modes(const std::string& transport, const std::string& rma) {
  if (transport == "verbs" || transport == "tcp") {
    return {{"self", "native"}, {"same_host", "native"}, {"other_host", "native"}};
  }
  // mixed (and auto across hosts without RDMA): rwin's tcp to other hosts, which reports "native".
  const bool own_tcp_across = transport == "mixed" || (transport == "auto" && !have_rdma_devices());
  if (rma == "native" || rma == "am") return {{"self", rma}, {"same_host", rma}, {"other_host", own_tcp_across ? "native" : rma}};
  const char* t = std::getenv("UCX_TLS");
  const std::string tls = t ? t : "";
  const bool shm = tls_allow(tls, {"posix", "sysv", "sm", "shm"});
  const char* remote = have_rdma_devices() ? "native" : "am";
  return {{"self", shm ? "direct" : remote},
          {"same_host", shm ? "direct" : remote},
          {"other_host", own_tcp_across ? "native" : remote}};
}

#if RWIN_INFO_HAVE_VERBS
std::string gid_type(const std::string& dev, int port, int index) {
  std::ifstream f("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/types/" +
                  std::to_string(index));
  std::string line;
  std::getline(f, line);
  return line;  // "RoCE v2", "IB/RoCE v1"; empty where the kernel has no gid_attrs (IB)
}

std::string gid_value(const ibv_gid& g) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", g.raw[0],
                g.raw[1], g.raw[2], g.raw[3], g.raw[4], g.raw[5], g.raw[6], g.raw[7], g.raw[8], g.raw[9], g.raw[10],
                g.raw[11], g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
  return buf;
}

// As ibv_devinfo prints it (ibv_port_state_str gives "active", less greppable next to its output).
const char* port_state(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP: return "PORT_NOP";
    case IBV_PORT_DOWN: return "PORT_DOWN";
    case IBV_PORT_INIT: return "PORT_INIT";
    case IBV_PORT_ARMED: return "PORT_ARMED";
    case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "PORT_ACTIVE_DEFER";
  }
  return "PORT_UNKNOWN";
}

const char* atomic_name(ibv_atomic_cap c) {
  switch (c) {
    case IBV_ATOMIC_NONE: return "none";
    case IBV_ATOMIC_HCA: return "hca";
    case IBV_ATOMIC_GLOB: return "global";
  }
  return "?";
}

#endif

#if RWIN_INFO_HAVE_VERBS
// The GID the verbs transport would use on this device and port with the current knobs
// (RWIN_GID_INDEX, RWIN_IB_GID_TYPE, RWIN_IB_GID_SUBNET), or why none fits.
json chosen_gid(const std::string& dev, int port) {
  namespace rt = rwin::transport;
  rt::TransportConfig cfg;
  cfg.ib_device = dev;
  cfg.ib_port = port;
  try {
    cfg.verbs = rt::VerbsParams::from_env();
    if (const char* v = rwin::knobs::env("RWIN_GID_INDEX")) {
      if (std::string why = rwin::common::parse_int_in(v, 0, 1023, cfg.gid_index); !why.empty()) cfg.gid_index = -1;
    }
    rt::verbs::DeviceChoice c;
    rt::verbs::open_device(cfg, c);  // opens and closes the device
    return {{"gid_index", c.gid_index}, {"gid", rt::verbs::gid_text(c.gid)}, {"type", rt::gid_type_name(c.gid_type)}};
  } catch (const std::exception& e) {
    return {{"error", e.what()}};
  }
}
#endif

// What the verbs transport would apply with the current knobs: the QP parameters and fork safety.
json verbs_settings() {
  json out;
  try {
    out["qp"] = rwin::transport::VerbsParams::from_env().text();
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
#if RWIN_INFO_HAVE_VERBS
  out["fork"] = rwin::transport::verbs::fork_status_text();
#endif
  try {
    out["hugepages"] = std::string(rwin::pages::huge_mode_name(rwin::pages::huge_mode_from_env())) +
                       " (window buffers; auto: THP for >= 2 MiB); system: " + rwin::pages::system_text();
  } catch (const std::exception& e) {
    out["hugepages"] = std::string("error: ") + e.what();
  }
  for (const char* v : {"RDMAV_FORK_SAFE", "IBV_FORK_SAFE", "RDMAV_HUGEPAGES_SAFE"}) {
    if (const char* x = std::getenv(v)) out["env"][v] = x;
  }
  return out;
}

json verbs_devices() {
  json out = json::array();
#if RWIN_INFO_HAVE_VERBS
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return out;
  for (int i = 0; i < n; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    json dev = {{"name", name}};
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) {
      dev["error"] = std::string("ibv_open_device failed: ") + std::strerror(errno);
      out.push_back(dev);
      continue;
    }
    ibv_device_attr da{};
    if (ibv_query_device(ctx, &da) == 0) {
      dev["atomic_cap"] = atomic_name(da.atomic_cap);
      dev["max_qp"] = da.max_qp;
      dev["max_mr_size"] = da.max_mr_size;
      json ports = json::array();
      for (int p = 1; p <= da.phys_port_cnt; ++p) {
        ibv_port_attr pa{};
        if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
        json port = {{"port", p},
                     {"state", port_state(pa.state)},
                     {"link_layer", pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "ethernet" : "infiniband"},
                     {"active_mtu", 128 << pa.active_mtu},
                     {"max_msg_sz", pa.max_msg_sz}};
        json gids = json::array();
        for (int g = 0; g < pa.gid_tbl_len; ++g) {
          ibv_gid gid{};
          if (ibv_query_gid(ctx, static_cast<uint8_t>(p), g, &gid) != 0) continue;
          bool zero = true;
          for (uint8_t b : gid.raw) zero = zero && b == 0;
          if (zero) continue;
          std::string type = gid_type(name, p, g);
          if (type.empty()) type = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE v1" : "IB";
          gids.push_back({{"index", g}, {"type", type}, {"gid", gid_value(gid)}});
        }
        port["gids"] = gids;
        if (pa.state == IBV_PORT_ACTIVE) port["chosen"] = chosen_gid(name, p);
        ports.push_back(port);
      }
      dev["ports"] = ports;
    } else {
      dev["error"] = std::string("ibv_query_device failed: ") + std::strerror(errno);
    }
    ibv_close_device(ctx);
    out.push_back(dev);
  }
  ibv_free_device_list(list);
#endif
  return out;
}

// The collectives' tuning table in effect: RWIN_COLL_TUNING's rules, then the built-in ones.
json coll_tuning() {
  json out = json::array();
  try {
    const auto cfg = rwin::detail::CollConfig::from_env("ucx");  // the rules do not depend on it
    for (const auto& r : cfg.tuning->rules()) {
      out.push_back({{"rule", rwin::detail::describe_rule(r)}, {"from", r.from}});
    }
  } catch (const std::exception& e) {
    out.push_back({{"error", e.what()}});
  }
  return out;
}

json knobs_section(std::string& transport, std::string& rma) {
  json out;
  // Resolve Options as a Context would: values set in code stay unset here, so every knob shows
  // the environment or its default; a value that does not parse is reported, not fatal.
  try {
    const rwin::Options o = rwin::Options::from_env();
    transport = o.transport;
    rma = o.ucx_rma;
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  const std::string& log_error = rwin::log::configure();
  if (!log_error.empty()) out["log_error"] = log_error;
  json knobs = json::array();
  for (const auto& s : rwin::knobs::settings()) {
    const bool secret = std::string_view(s.knob->name) == "RWIN_JOB_KEY" && s.source != rwin::knobs::Source::Default;
    knobs.push_back({{"name", s.knob->name},
                     {"value", secret ? "(set)" : s.value},
                     {"source", rwin::knobs::source_name(s.source)},
                     {"kind", rwin::knobs::kind_name(s.knob->kind)},
                     {"default", s.knob->default_text},
                     {"range", s.knob->range},
                     {"layer", s.knob->layer},
                     {"meaning", s.knob->meaning}});
  }
  out["knobs"] = knobs;
  out["verbs"] = verbs_settings();
  // What RWIN_TCP_CONGESTION resolves to here (own tcp's data connections), beside the kernel's default.
  {
    std::string kernel = "unknown";
    std::ifstream("/proc/sys/net/ipv4/tcp_congestion_control") >> kernel;
    try {
      const std::string cc = rwin::transport::tcp::resolve_congestion(rwin::knobs::env("RWIN_TCP_CONGESTION"));
      out["tcp_congestion"] = (cc.empty() ? kernel + " (the kernel's)" : cc) + "; kernel default " + kernel;
    } catch (const std::exception& e) {
      out["tcp_congestion"] = std::string("error: ") + e.what();
    }
  }
  out["coll_tuning"] = coll_tuning();
  json unknown = json::array();
  for (const auto& u : rwin::knobs::unknown_variables(environ)) {
    unknown.push_back({{"name", u.name}, {"closest", u.closest}, {"message", rwin::knobs::unknown_message(u)}});
  }
  out["unknown_variables"] = unknown;
  return out;
}

void print_text(const json& j) {
  std::cout << "rwin " << j["version"].get<std::string>() << "\n";
  if (j.contains("build")) {
    const json& b = j["build"];
    std::cout << "  build: " << b["build_type"].get<std::string>() << ", compiler " << b["compiler"].get<std::string>()
              << ", sanitizers " << (b["sanitizers"].get<std::string>().empty() ? "none" : b["sanitizers"].get<std::string>())
              << ", verbs " << (b["verbs"].get<bool>() ? "compiled in" : "not compiled in") << "\n";
    std::cout << "  transports:";
    for (const auto& t : j["transports"]) std::cout << " " << t.get<std::string>();
    std::cout << "\n";
  }
  if (j.contains("ucx")) {
    const json& u = j["ucx"];
    std::cout << "\nUCX " << u["version"].get<std::string>() << "\n";
    for (const auto& r : u["resources"]) {
      std::cout << "  " << r["component"].get<std::string>() << "/" << r["md"].get<std::string>() << ": "
                << r["transport"].get<std::string>() << "/" << r["device"].get<std::string>() << " ("
                << r["type"].get<std::string>() << ")\n";
    }
    const json& m = j["rma_modes"];
    std::cout << "  rma mode (transport " << j["rma_modes_for"].get<std::string>() << "): self "
              << m["self"].get<std::string>() << ", same host " << m["same_host"].get<std::string>() << ", other host "
              << m["other_host"].get<std::string>() << "\n";
  }
  if (j.contains("verbs")) {
    std::cout << "\nverbs\n";
    if (j["verbs"].empty()) std::cout << "  no verbs devices\n";
    for (const auto& d : j["verbs"]) {
      std::cout << "  " << d["name"].get<std::string>();
      if (d.contains("error")) {
        std::cout << ": " << d["error"].get<std::string>() << "\n";
        continue;
      }
      std::cout << ": atomic_cap " << d["atomic_cap"].get<std::string>() << "\n";
      for (const auto& p : d["ports"]) {
        std::cout << "    port " << p["port"] << ": " << p["state"].get<std::string>() << ", "
                  << p["link_layer"].get<std::string>() << ", active_mtu " << p["active_mtu"] << ", max_msg_sz "
                  << p["max_msg_sz"] << "\n";
        for (const auto& g : p["gids"]) {
          std::cout << "      gid " << g["index"] << " " << g["type"].get<std::string>() << " "
                    << g["gid"].get<std::string>() << "\n";
        }
        if (p.contains("chosen")) {
          const json& c = p["chosen"];
          if (c.contains("error")) {
            std::cout << "      rwin would use: none: " << c["error"].get<std::string>() << "\n";
          } else {
            std::cout << "      rwin would use: gid " << c["gid_index"] << " (" << c["type"].get<std::string>() << " "
                      << c["gid"].get<std::string>() << ")\n";
          }
        }
      }
    }
  }
  if (j.contains("config")) {
    const json& c = j["config"];
    std::cout << "\nconfiguration (value, source)\n";
    for (const auto& k : c["knobs"]) {
      std::printf("  %-30s %-40s %s\n", k["name"].get<std::string>().c_str(), k["value"].get<std::string>().c_str(),
                  k["source"].get<std::string>().c_str());
    }
    for (const auto& u : c["unknown_variables"]) std::cout << "  warning: " << u["message"].get<std::string>() << "\n";
    const json& v = c["verbs"];
    if (v.contains("qp")) std::cout << "  verbs qp: " << v["qp"].get<std::string>() << "\n";
    if (v.contains("fork")) std::cout << "  verbs fork safety: " << v["fork"].get<std::string>() << "\n";
    if (v.contains("hugepages")) std::cout << "  verbs huge pages: " << v["hugepages"].get<std::string>() << "\n";
    if (v.contains("env")) {
      for (const auto& [k, x] : v["env"].items()) std::cout << "  " << k << "=" << x.get<std::string>() << " (libibverbs)\n";
    }
    if (c.contains("tcp_congestion")) std::cout << "  tcp data connections' congestion control: " << c["tcp_congestion"].get<std::string>() << "\n";
    if (c.contains("coll_tuning")) {
      std::cout << "  collective tuning (first match wins):\n";
      for (const auto& r : c["coll_tuning"]) {
        if (r.contains("error")) {
          std::cout << "    error: " << r["error"].get<std::string>() << "\n";
        } else {
          std::printf("    %-60s %s\n", r["rule"].get<std::string>().c_str(), r["from"].get<std::string>().c_str());
        }
      }
    }
    if (c.contains("error")) std::cout << "  error: " << c["error"].get<std::string>() << "\n";
    if (c.contains("log_error")) std::cout << "  error: " << c["log_error"].get<std::string>() << "\n";
  }
  std::cout.flush();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rwin-info: rwin's version, build, transports, devices and configuration", "rwin-info"};
  rwin::cli::setup(app, rwin::version());
  bool config_only = false, devices_only = false, as_json = false;
  app.add_flag("-c,--config", config_only, "print the configuration only (every RWIN_* knob, its value and source)");
  app.add_flag("-d,--devices", devices_only, "print the devices only (UCX resources, verbs devices)");
  app.add_flag("--json", as_json, "print one JSON document");
  rwin::cli::parse_or_exit(app, argc, argv);

  const bool all = !config_only && !devices_only;
  json j;
  j["version"] = rwin::version();
  std::string transport = "auto", rma = "auto";
  if (all || config_only) j["config"] = knobs_section(transport, rma);
  if (all) {
    j["build"] = build_info();
    j["transports"] = transports();
  }
  if (all || devices_only) {
    if (!j.contains("config")) {
      // The modes depend on the settings even when they are not printed.
      const char* t = rwin::knobs::env("RWIN_TRANSPORT");
      const char* r = rwin::knobs::env("RWIN_UCX_RMA");
      if (t) transport = t;
      if (r) rma = r;
    }
    j["ucx"] = {{"version", ucp_get_version_string()}, {"resources", ucx_resources()}};
    j["rma_modes"] = rma_modes(transport, rma);
    const bool mixed = transport == "mixed" || (transport == "auto" && !have_rdma_devices());
    j["rma_modes_for"] = transport == "verbs" || transport == "tcp" ? transport
                         : mixed ? "ucx on this host (RWIN_UCX_RMA=" + rma + "), rwin's tcp to other hosts"
                                 : "ucx, RWIN_UCX_RMA=" + rma;
    j["verbs"] = verbs_devices();
  }
  if (as_json) {
    std::cout << j.dump(2) << "\n";
  } else {
    print_text(j);
  }
  return 0;
}

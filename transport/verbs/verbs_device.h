// Device discovery: which device, port and GID the transport uses.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "transport/transport.h"
#include "transport/verbs/verbs_handles.h"

namespace rwin::transport::verbs {

struct DeviceChoice {
  std::string name;  // "rxe0"
  int port = 1;
  int gid_index = 0;
  ibv_gid gid{};
  bool roce = false;     // link layer Ethernet: every packet needs a GRH (sgid_index = gid_index)
  std::string gid_kind;  // "roce v2 ipv4", "roce v1", "ib", ...: for describe()/messages
  GidType gid_type = GidType::Auto;  // of the chosen GID; Auto = unknown (kernel without GID types)
  ibv_device_attr dev_attr{};
  ibv_port_attr port_attr{};
};

// Opens the device/port/GID selected by cfg (see TransportConfig; cfg.verbs.gid_type and
// gid_subnet filter the GIDs) and fills `choice`. Calls fork_safety(cfg.verbs.fork_safe) first.
// Throws TransportError listing every device seen (name, port state) when none fits, or every GID
// seen when none passes the filters.
ContextPtr open_device(const TransportConfig& cfg, DeviceChoice& choice);

// The devices a transport drives (its rails), in lane order. RWIN_IB_HCA (cfg.verbs.hca) set: the
// listed devices in list order (each name matching by prefix unless '=', each with its port or
// cfg.ib_port), or with '^' every usable device not listed; a listed device that cannot be used is
// an error naming it. Unset: one device, cfg.ib_device or else the first usable one, preferring a
// device on the NUMA node of the calling thread's CPU (sysfs numa_node; devices without one, like
// rxe, keep the kernel's order). Both set: an error. Throws TransportError.
struct OpenedDevice {
  ContextPtr ctx;
  DeviceChoice choice;
};
std::vector<OpenedDevice> open_devices(const TransportConfig& cfg);
// The NUMA node sysfs gives the device's PCI function, -1 when none (virtual devices such as rxe).
int device_numa_node(const std::string& name);

// Fork safety (RWIN_IB_FORK_SAFE), before this process opens a device: Auto and On call
// ibv_fork_init() unless the kernel copies DMA-pinned pages into a child at fork (Linux >= 5.13
// answers IBV_FORK_UNNEEDED over netlink); it must precede the process's first registration, so
// a failure (EINVAL: memory registered already) is a warning under Auto and a TransportError under
// On. Off: nothing. Returns the state for logs and rwin-info: "unneeded (the kernel copies pinned
// pages on fork)", "enabled (ibv_fork_init)", "disabled".
std::string fork_safety(ForkSafe mode);
const char* fork_status_text();  // ibv_is_fork_initialized() as fork_safety() words it

// The address vector toward a peer's QP (RTR): a GRH on RoCE (every packet) or when the peer has no
// LID, from our GID index, with the knobs' traffic class and hop limit; the SL on every path.
// The transport and bench/raw_verbs.cpp both build their QPs with it.
void fill_path(ibv_ah_attr& ah, const DeviceChoice& c, const VerbsParams& p, const uint8_t remote_gid[16],
               uint16_t remote_lid);

// GidType of an ibv_gid_entry / sysfs type on a port of this link layer (IB-typed entries on an
// Ethernet port are RoCE v1).
GidType gid_type_code(int ibv_gid_type, bool roce) noexcept;

// "2001:db8::1" style text of a GID, for messages.
std::string gid_text(const ibv_gid& gid);

}  // namespace rwin::transport::verbs

// Device discovery: which device, port and GID the transport uses.
#pragma once

#include <infiniband/verbs.h>

#include <string>

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
  ibv_device_attr dev_attr{};
  ibv_port_attr port_attr{};
};

// Opens the device/port/GID selected by cfg (see TransportConfig) and fills `choice`.
// Throws TransportError listing every device seen (name, port state) when none fits.
ContextPtr open_device(const TransportConfig& cfg, DeviceChoice& choice);

// "2001:db8::1" style text of a GID, for messages.
std::string gid_text(const ibv_gid& gid);

}  // namespace rwin::transport::verbs

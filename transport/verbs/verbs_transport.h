// Factory for the raw libibverbs transport (RC queue pairs over InfiniBand or RoCE, e.g. rdma_rxe).
// Everything else about it is private to transport/verbs/.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace rwin::transport {

// Opens the devices of cfg.verbs.hca (RWIN_IB_HCA), else the one named by cfg.ib_device (or the
// first whose port cfg.ib_port is ACTIVE), picks each one's GID (cfg.gid_index, -1 = auto) and
// creates a protection domain and completion queue per device. Queue pairs are created by
// connect() (cfg.verbs.qps_per_peer per peer and device), or one per add_peer() with
// cfg.dynamic_peers.
// Throws TransportError naming every device it saw when none fits.
std::unique_ptr<Transport> make_verbs_transport(const TransportConfig& cfg);

// How many RDMA devices ibv_get_device_list() reports (0 when none or on error). Never throws;
// opens nothing, so it is safe to call before fork().
int verbs_device_count() noexcept;

}  // namespace rwin::transport

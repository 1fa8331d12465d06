// The "mixed" transport (RWIN_TRANSPORT=mixed, and what "auto" picks for a job across hosts without
// RDMA devices): UCX for the ranks on this host (its shared memory: direct loads and stores), rwin's own
// tcp for the ranks on other hosts (one copy each way, a passive target). See mixed_transport.cpp.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace rwin::transport {

// TransportConfig::host_of says which ranks share a host (every rank must pass the same vector).
std::unique_ptr<Transport> make_mixed_transport(const TransportConfig& cfg);

}  // namespace rwin::transport

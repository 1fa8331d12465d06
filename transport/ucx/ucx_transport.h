// UCX (ucp) transport. See ucx_transport_impl.h for the design notes and the file layout.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace rwin::transport {

std::unique_ptr<Transport> make_ucx_transport(const TransportConfig& cfg);

}  // namespace rwin::transport

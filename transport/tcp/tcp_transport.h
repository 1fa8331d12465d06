// rwin's own TCP transport (RWIN_TRANSPORT=tcp). See tcp_transport_impl.h for the design and the
// file layout, tcp_wire.h for the wire format.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace rwin::transport {

std::unique_ptr<Transport> make_tcp_transport(const TransportConfig& cfg);

}  // namespace rwin::transport

// TCP options of rwin's data connections: no Nagle, and the congestion control RWIN_TCP_CONGESTION
// picks (tcp_congestion.cpp says why).
#pragma once

#include <string>

namespace rwin::transport::tcp {

// The algorithm every data connection is set to ("": leave the kernel's) from the knob's value (null:
// unset, i.e. auto). auto: cubic where the kernel would give bbr and lets this process choose; system:
// the kernel's; a name: that one, or a TransportError naming the value and what the kernel offers.
std::string resolve_congestion(const char* knob);

// TCP_NODELAY, and `congestion` unless empty. On every data socket, before it carries a byte.
void tune_data_socket(int fd, const std::string& congestion) noexcept;

// The socket's congestion control ("" if it cannot be read).
std::string socket_congestion(int fd);

}  // namespace rwin::transport::tcp

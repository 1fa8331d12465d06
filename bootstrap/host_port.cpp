// HostPort: "host:port" / "[ipv6]:port" parsing.
#include <string>

#include "bootstrap/bootstrap.h"
#include "bootstrap/parse_number.h"

namespace rwin::bootstrap {

// ---------------------------------------------------------------------------------------------
// HostPort

HostPort HostPort::parse(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return BootstrapError(BootstrapError::Kind::Config,
                          "bad address '" + text + "': " + why + " (expected host:port or [ipv6]:port)");
  };
  HostPort hp;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos) throw bad("missing ']'");
    hp.host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') throw bad("missing ':port' after ']'");
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) throw bad("missing ':port'");
    hp.host = text.substr(0, colon);
    if (hp.host.find(':') != std::string::npos) throw bad("ipv6 hosts need brackets");
    port_text = text.substr(colon + 1);
  }
  if (hp.host.empty()) throw bad("empty host");
  if (port_text.empty()) throw bad("empty port");
  // Port 0 (any free port) parses; only a job of one can use it, which Bootstrap checks.
  int value = 0;
  const std::string why = parse_int_in(port_text, 0, 65535, value);
  if (!why.empty()) throw bad("port '" + port_text + "' is not a port number: " + why);
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

std::string HostPort::str() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}


}  // namespace rwin::bootstrap

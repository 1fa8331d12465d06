#include "transport/transport.h"

#include "transport/mixed/mixed_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/ucx/ucx_transport.h"
#ifdef RWIN_HAVE_VERBS
#include "transport/verbs/verbs_transport.h"
#endif

namespace rwin::transport {

const char* op_name(Op op) noexcept {
  switch (op) {
    case Op::Write: return "write";
    case Op::Read: return "read";
    case Op::AtomicAdd: return "atomic_add";
    case Op::FetchAdd: return "fetch_add";
    case Op::CompareSwap: return "compare_swap";
    case Op::Swap: return "swap";
    case Op::Flush: return "flush";
    case Op::Accumulate: return "accumulate";
  }
  return "?";
}

// Defaults for transports without run-time peers.
int Transport::add_peer() { throw TransportError(describe() + ": this transport has no run-time peers (agent)"); }
std::vector<uint8_t> Transport::local_endpoint(int peer) {
  throw TransportError(describe() + ": local_endpoint(" + std::to_string(peer) + "): no run-time peers");
}
void Transport::connect_peer(int peer, std::span<const uint8_t>) {
  throw TransportError(describe() + ": connect_peer(" + std::to_string(peer) + "): no run-time peers");
}
std::unique_ptr<MemoryRegion> Transport::expose_memory(void* addr, size_t bytes) {
  (void)addr;
  throw TransportError(describe() + ": expose_memory(" + std::to_string(bytes) + " bytes): not supported");
}

std::unique_ptr<Transport> make_transport(const TransportConfig& cfg) {
  if (cfg.name == "ucx") return make_ucx_transport(cfg);
  if (cfg.name == "tcp") return make_tcp_transport(cfg);
  if (cfg.name == "mixed") return make_mixed_transport(cfg);
#ifdef RWIN_HAVE_VERBS
  if (cfg.name == "verbs") return make_verbs_transport(cfg);
  throw TransportError("unknown transport '" + cfg.name + "' (known: ucx, tcp, mixed, verbs)");
#else
  if (cfg.name == "verbs") {
    throw TransportError("transport 'verbs' is not built in (libibverbs-dev was not found at configure time)");
  }
  throw TransportError("unknown transport '" + cfg.name + "' (known: ucx, tcp, mixed)");
#endif
}

}  // namespace rwin::transport

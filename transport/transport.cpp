#include "transport/transport.h"

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
  }
  return "?";
}

std::unique_ptr<Transport> make_transport(const TransportConfig& cfg) {
  if (cfg.name == "ucx") return make_ucx_transport(cfg);
#ifdef RWIN_HAVE_VERBS
  if (cfg.name == "verbs") return make_verbs_transport(cfg);
  throw TransportError("unknown transport '" + cfg.name + "' (known: ucx, verbs)");
#else
  if (cfg.name == "verbs") {
    throw TransportError("transport 'verbs' is not built in (libibverbs-dev was not found at configure time)");
  }
  throw TransportError("unknown transport '" + cfg.name + "' (known: ucx)");
#endif
}

}  // namespace rwin::transport

// The collectives' names (describe_header: a message's call in an error), their knobs
// (CollConfig::from_env, docs/CONFIG.md) and the tuning table's choice per call; split from
// channel.cpp, the message layer that uses them.
#include <algorithm>
#include <cstring>
#include <string>

#include "bootstrap/parse_number.h"
#include "common/knobs.h"
#include "collectives/team_state.h"

namespace rwin::detail {

const char* coll_kind_name(CollKind k) noexcept {
  switch (k) {
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Allgather: return "allgather";
    case CollKind::ReduceScatter: return "reduce_scatter";
    case CollKind::Allreduce: return "allreduce";
    case CollKind::AllToAll: return "all_to_all";
    case CollKind::Barrier: return "barrier";
    case CollKind::AllToAllV: return "all_to_all_v";
  }
  return "?";
}

std::string describe_header(const MsgHeader& h) {
  std::string s = coll_kind_name(static_cast<CollKind>(h.kind));
  s += std::string(" ") + dtype_name(static_cast<DType>(h.dtype)) + " count " + std::to_string(h.count);
  if (h.kind == static_cast<uint8_t>(CollKind::Broadcast)) s += " root " + std::to_string(h.root);
  if (h.kind == static_cast<uint8_t>(CollKind::Allreduce) || h.kind == static_cast<uint8_t>(CollKind::ReduceScatter)) {
    s += std::string(" op ") + reduce_op_name(static_cast<ReduceOp>(h.op));
  }
  if (h.kind == static_cast<uint8_t>(CollKind::Allreduce)) {
    s += h.mode == 2 ? " mode ring" : h.mode == 3 ? " mode bruck" : h.mode == 6 ? " mode ring (pull)"
         : h.mode == kHierMode ? " mode hier (through the host leaders)"
         : h.mode == kHierChainMode ? " mode hier (a chain along the hosts, " + std::to_string(h.root) + " lanes)"
                                    : " mode mesh";
  }
  if (h.kind != static_cast<uint8_t>(CollKind::Allreduce) && h.mode == kHierMode) s += " (through the host leaders)";
  if (h.kind != static_cast<uint8_t>(CollKind::Allreduce) && h.mode == kHierChainMode) s += " (a chain along the hosts)";
  if (h.kind != static_cast<uint8_t>(CollKind::Allreduce) && h.mode == kPushMode) s += " (pushed into the members' views)";
  if (h.kind != static_cast<uint8_t>(CollKind::Allreduce) && h.mode == 3) s += " (bruck)";
  if (h.kind == static_cast<uint8_t>(CollKind::Broadcast) && h.mode == 4) s += " (chain)";
  if (h.kind == static_cast<uint8_t>(CollKind::Broadcast) && h.mode == 5) s += " (tree)";
  if (h.mode == 6 && h.kind != static_cast<uint8_t>(CollKind::Allreduce)) s += " (pull)";
  if (h.phase == 1) s += " [scratch growth handshake]";
  if (h.mode == 6 && h.phase >= 3 && h.phase <= 10) {  // pull.h
    static const char* const kPhase[] = {"pull offers", "pulled", "blocks not pulled", "", "", "pull offers",
                                         "pull verdicts", "done reading"};
    s += std::string(" [") + kPhase[h.phase - 3] + "]";
  }
  if (h.phase >= 16 && h.phase < 64) s += " [bruck round " + std::to_string(h.phase - 16) + "]";
  if (h.phase == 64) s += " [to the host leader]";
  if (h.phase == 65) s += " [between host leaders]";
  if (h.phase == 66) s += " [from the host leader]";
  s += " (call #" + std::to_string(h.call_seq) + ")";
  return s;
}

namespace {
uint64_t env_size(const char* name, uint64_t dflt, uint64_t lo, uint64_t hi) {
  const char* v = knobs::env(name);
  if (!v) return dflt;
  uint64_t out = 0;
  std::string why = bootstrap::parse_size(v, out);
  if (why.empty() && (out < lo || out > hi)) why = "outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!why.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string(name) + "='" + v + "' is not a size (" + why + "); expected " +
                                                bootstrap::kSizeForm);
  }
  return out;
}
}  // namespace

namespace {

// A knob that is `auto` (or unset: 0) or a count in [1, hi]; anything else is InvalidArgument naming it.
int auto_or_count(const char* name, const char* what, uint64_t hi) {
  const char* v = knobs::env(name);
  if (!v || std::string_view(v) == "auto") return 0;
  uint64_t n = 0;
  std::string why = bootstrap::parse_size(v, n);
  if (why.empty() && (n < 1 || n > hi)) why = "outside [1, " + std::to_string(hi) + "]";
  if (!why.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string(name) + "='" + v + "' is not a " + what + " (" + why +
                                                "); expected auto or 1.." + std::to_string(hi));
  }
  return static_cast<int>(n);
}

}  // namespace

CollConfig CollConfig::from_env(const std::string& transport) {
  CollConfig c;
  if (transport == "verbs") c.inline_max = 16 * 1024;
  c.chunk_bytes = env_size("RWIN_COLL_CHUNK_BYTES", c.chunk_bytes, 64, uint64_t{1} << 30) & ~uint64_t{63};
  c.slots = auto_or_count("RWIN_COLL_SLOTS", "slot count", 64);
  c.lines = static_cast<int>(env_size("RWIN_COLL_LINES", static_cast<uint64_t>(c.lines), 0, 64));
  c.mesh_max = env_size("RWIN_ALLREDUCE_MESH_MAX", c.mesh_max, 0, uint64_t{1} << 62);
  c.mesh_max_set = knobs::env("RWIN_ALLREDUCE_MESH_MAX") != nullptr;
  c.bruck_max = env_size("RWIN_COLL_BRUCK_MAX", c.bruck_max, 0, uint64_t{1} << 62);
  c.bruck_max_set = knobs::env("RWIN_COLL_BRUCK_MAX") != nullptr;
  if (const char* v = knobs::env("RWIN_ALLREDUCE")) {
    try {
      c.force = parse_allreduce_mode(v);
    } catch (const Error&) {
      throw Error(ErrorCode::InvalidArgument, std::string("RWIN_ALLREDUCE='") + v + "': expected auto, mesh, ring or bruck");
    }
  }
  c.inline_max = std::min(env_size("RWIN_COLL_COPY_MAX", c.inline_max, 0, uint64_t{1} << 30), c.chunk_bytes);
  c.pull_min = env_size("RWIN_COLL_PULL_MIN", c.pull_min, 0, uint64_t{1} << 62);
  c.hier_max = env_size("RWIN_COLL_HIER_MAX", c.hier_max, 0, uint64_t{1} << 62);
  c.chain_lanes = auto_or_count("RWIN_COLL_CHAIN_LANES", "lane count", 1024);
  c.tuning = std::make_shared<const TuningTable>(TuningTable::load(TuningLimits{c.mesh_max, c.bruck_max, c.chunk_bytes, c.bruck_max_set, c.mesh_max_set}));
  return c;
}

CollAlgo TeamState::algo(TunedColl coll, uint64_t bytes, bool* users) const {
  if (coll == TunedColl::ReduceScatter) {
    uint64_t gathered = 0;
    bytes = __builtin_mul_overflow(bytes, static_cast<uint64_t>(nr), &gathered) ? UINT64_MAX / 2 : gathered / 2;
  }
  AlgoMemo& m = algo_memo[static_cast<size_t>(coll)];
  if (!m.valid || m.bytes != bytes) {
    const TuningRule& r = cfg.tuning->choose(TuningKey{coll, mapped, c->opt.transport, nr, bytes});
    m = AlgoMemo{true, bytes, r.algo, r.from.rfind("built-in", 0) != 0};
  }
  if (users) *users = m.users;
  return m.algo;
}

uint64_t chunk_payload(const TeamState& t) { return t.slot_bytes - kHeaderBytes; }
uint64_t chunk_count(const TeamState& t, uint64_t bytes) {
  const uint64_t p = chunk_payload(t);
  return bytes == 0 ? 1 : (bytes + p - 1) / p;
}

ByteView::ByteView(const WindowState& w) {
  state_.buf = std::shared_ptr<BufferState>(std::shared_ptr<BufferState>(), w.buf.get());
  state_.dtype = DType::U8;
  state_.shape = {1, static_cast<int64_t>(std::max<size_t>(w.bytes, 1))};
  state_.bytes = w.bytes;
  state_.offset = w.offset;
  ptr_ = std::shared_ptr<WindowState>(std::shared_ptr<WindowState>(), &state_);
}

}  // namespace rwin::detail

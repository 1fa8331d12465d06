// Teams: forming one (make_team, world), the store exchange among members only, team windows.
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "collectives/team_state.h"
#include "ops.h"
#include "window_blob.h"

namespace rwin {

using namespace detail;

namespace detail {

std::string TeamState::describe() const {
  if (id == 0) return "world";
  std::string s = "team " + std::to_string(id) + " {";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "}";
}

int64_t TeamState::load(int64_t index) const {
  return std::atomic_ref<int64_t>(*word(index)).load(std::memory_order_acquire);
}

ContextImpl& TeamState::live(const char* what) const {
  if (!c) throw Error(ErrorCode::UseAfterFree, std::string(what) + ": the team's context was destroyed");
  return *c;
}

TeamState& team_of(const std::shared_ptr<TeamState>& s, const char* what) {
  if (!s) throw Error(ErrorCode::InvalidArgument, std::string(what) + ": empty Team handle (never made)");
  s->live(what);
  return *s;
}

TeamState& team_call(const std::shared_ptr<TeamState>& s, const char* what) {
  TeamState& t = team_of(s, what);
  t.c->check_owner(what);
  return t;
}

namespace {

// Sets `key` and waits for every key of `wanted`, keeping the transport progressing (over tcp a peer
// may need our progress to finish what it does before it reaches the store). Returns their values.
std::vector<bootstrap::Bytes> store_collect(ContextImpl& c, const std::string& key, const std::vector<uint8_t>& mine,
                                            const std::vector<std::string>& wanted, const std::vector<int>& from,
                                            const char* what, const std::function<void()>& check = {}) {
  auto& st = c.bs->store();
  std::vector<bootstrap::Bytes> out;
  try {
    st.set(key, mine);
    Deadline deadline(c.opt.op_timeout);
    for (;;) {
      const std::vector<bool> have = st.check(wanted);
      if (std::all_of(have.begin(), have.end(), [](bool b) { return b; })) break;
      c.progress();
      if (check) check();
      c.watch();
      if (c.failures_reported < c.known_failures.size()) c.raise_new_failure(std::string(" during ") + what);
      if (deadline.passed()) {
        std::string missing;
        for (size_t i = 0; i < have.size(); ++i) {
          if (!have[i]) missing += (missing.empty() ? "" : ", ") + std::to_string(from[i]);
        }
        c.degraded = true;
        throw Error(ErrorCode::Timeout, c.who() + ": " + what + ": timed out after " +
                                            std::to_string(c.opt.op_timeout.count()) + " ms waiting for rank(s) " +
                                            missing + " (did they make the same call?)");
      }
      sched_yield();
    }
    for (const auto& k : wanted) out.push_back(st.get(k, c.opt.op_timeout));
  } catch (const bootstrap::BootstrapError& e) {
    throw c.store_error(e, c.who() + ": " + what);
  }
  return out;
}

std::string list_str(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::shared_ptr<TeamState> new_team(Context& ctx, uint64_t id, const std::vector<int>& ranks) {
  ContextImpl& c = ContextAccess::impl(ctx);
  auto t = std::make_shared<TeamState>();
  t->ctx = &ctx;
  t->c = &c;
  t->id = id;
  t->ranks = ranks;
  t->nr = static_cast<int>(ranks.size());
  t->team_rank_of.assign(static_cast<size_t>(c.nranks), -1);
  for (int i = 0; i < t->nr; ++i) t->team_rank_of[static_cast<size_t>(ranks[static_cast<size_t>(i)])] = i;
  t->me = t->team_rank_of[static_cast<size_t>(c.rank)];
  t->cfg = CollConfig::from_env(c.opt.transport);
  t->sent.assign(static_cast<size_t>(t->nr), 0);
  t->recvd.assign(static_cast<size_t>(t->nr), 0);
  t->unacked.assign(static_cast<size_t>(t->nr), 0);
  t->line_sent.assign(static_cast<size_t>(t->nr), 0);
  t->line_recvd.assign(static_cast<size_t>(t->nr), 0);
  t->line_unacked.assign(static_cast<size_t>(t->nr), 0);
  for (const int r : ranks) t->mapped = t->mapped && (r == c.rank || c.peers[static_cast<size_t>(r)].direct);
  std::erase_if(c.teams, [](const std::weak_ptr<TeamState>& w) { return w.expired(); });
  c.teams.push_back(t);
  return t;
}

}  // namespace

std::vector<std::vector<uint8_t>> team_exchange(TeamState& t, const std::string& tag, const std::vector<uint8_t>& mine,
                                                const char* what) {
  ContextImpl& c = t.live(what);
  const std::string prefix = "rwin.coll.t" + std::to_string(t.id) + "." + tag + ".";
  std::vector<std::string> keys;
  for (int r : t.ranks) keys.push_back(prefix + std::to_string(r));
  // A member that found a mismatch meanwhile (e.g. in a growth handshake) ends this wait too.
  auto check = [&t, what] {
    if (t.signals && t.signals->ctx() && t.abort_now() != 0) {
      throw Error(ErrorCode::CollectiveMismatch, t.c->who() + ": " + what + " on " + t.describe() + ": team rank " +
                                                     std::to_string((t.abort_now() & 0xffff) - 1) +
                                                     " found that the members' collective calls differ");
    }
  };
  auto got = store_collect(c, prefix + std::to_string(c.rank), mine, keys, t.ranks, what, check);
  return {got.begin(), got.end()};
}

std::shared_ptr<BufferState> create_team_buffer(TeamState& t, const char* what, const std::string& name, size_t bytes,
                                                BufferState::Kind kind, DType dtype, Shape2 shape,
                                                const std::string& describe) {
  ContextImpl& c = t.live(what);
  auto b = create_buffer_among(c, what, name, bytes, kind, dtype, shape, describe, t.ranks, " on " + t.describe(),
                               [&](const std::vector<uint8_t>& mine) {
                                 return team_exchange(t, "w" + std::to_string(++t.alloc_seq), mine, what);
                               });
  b->team = t.describe();
  std::weak_ptr<TeamState> weak = t.shared_from_this();
  b->team_sync = [weak] {
    auto ts = weak.lock();
    if (!ts || !ts->c) throw Error(ErrorCode::UseAfterFree, "free of a team buffer: the team is gone");
    ts->c->quiet(ts->c->opt.op_timeout);
    team_barrier(*ts, "free (team barrier)");
  };
  return b;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Team handles

bool Team::valid() const noexcept { return s_ && s_->c; }
int Team::rank() const { return team_of(s_, "Team::rank").me; }
int Team::size() const { return team_of(s_, "Team::size").nr; }
const std::vector<int>& Team::ranks() const { return team_of(s_, "Team::ranks").ranks; }
int Team::global_rank(int team_rank) const {
  TeamState& t = team_of(s_, "Team::global_rank");
  if (team_rank < 0 || team_rank >= t.nr) {
    throw Error(ErrorCode::InvalidArgument, t.c->who() + ": Team::global_rank(" + std::to_string(team_rank) +
                                                ") outside " + t.describe() + " of size " + std::to_string(t.nr));
  }
  return t.ranks[static_cast<size_t>(team_rank)];
}

WindowBuffer Team::alloc_window_buffer(const std::string& name, size_t bytes) {
  TeamState& t = team_call(s_, "Team::alloc_window_buffer");
  if (bytes == 0 || bytes > (size_t{1} << 62)) {
    throw Error(ErrorCode::InvalidArgument, t.c->who() + ": Team::alloc_window_buffer '" + name + "': size " +
                                                std::to_string(bytes) + " bytes must be in [1, 2^62]");
  }
  const std::string describe = "buffer '" + name + "' (" + std::to_string(bytes) + " bytes)";
  auto b = create_team_buffer(t, "Team::alloc_window_buffer", name, bytes, BufferState::Kind::Buffer, DType::I32,
                              Shape2{1, static_cast<int64_t>(bytes)}, describe);
  return ContextAccess::buffer(b);
}

Window Team::alloc_window(const std::string& name, DType dtype, Shape2 shape) {
  TeamState& t = team_call(s_, "Team::alloc_window");
  const uint64_t esz = dtype_size(dtype);
  int64_t elems = 0;
  uint64_t bytes = 0;
  if (esz == 0 || shape[0] <= 0 || shape[1] <= 0 || __builtin_mul_overflow(shape[0], shape[1], &elems) ||
      __builtin_mul_overflow(static_cast<uint64_t>(elems), esz, &bytes) || bytes > (uint64_t{1} << 62)) {
    throw Error(ErrorCode::InvalidArgument, t.c->who() + ": Team::alloc_window '" + name + "': dtype code " +
                                                std::to_string(static_cast<int>(dtype)) + ", shape " +
                                                shape_str(shape) + ": must be a DType and a positive shape");
  }
  const std::string describe = "'" + name + "' " + dtype_name(dtype) + shape_str(shape) + " (" +
                               std::to_string(bytes) + " bytes)";
  auto v = std::make_shared<WindowState>();
  v->dtype = dtype;
  v->shape = shape;
  v->bytes = bytes;
  v->owns_buffer = true;
  v->buf = create_team_buffer(t, "Team::alloc_window", name, bytes, BufferState::Kind::Window, dtype, shape, describe);
  return ContextAccess::window(v);
}

// ---------------------------------------------------------------------------------------------
// Forming teams

Team world(Context& ctx) {
  ContextImpl& c = ContextAccess::impl(ctx);
  if (!c.world_team) {
    c.check_owner("world");
    std::vector<int> all(static_cast<size_t>(c.nranks));
    for (int r = 0; r < c.nranks; ++r) all[static_cast<size_t>(r)] = r;
    c.world_team = new_team(ctx, 0, all);
  }
  return Team(c.world_team);
}

Team make_team(Context& ctx, const std::vector<int>& ranks) {
  ContextImpl& c = ContextAccess::impl(ctx);
  c.check_owner("make_team");
  const std::string what = c.who() + ": make_team " + list_str(ranks);
  if (ranks.empty()) throw Error(ErrorCode::InvalidArgument, what + ": the list is empty");
  std::vector<bool> seen(static_cast<size_t>(c.nranks), false);
  for (int r : ranks) {
    if (r < 0 || r >= c.nranks) {
      throw Error(ErrorCode::InvalidArgument, what + ": rank " + std::to_string(r) + " is outside the job (0.." +
                                                  std::to_string(c.nranks - 1) + ")");
    }
    if (seen[static_cast<size_t>(r)]) throw Error(ErrorCode::InvalidArgument, what + ": rank " + std::to_string(r) + " appears twice");
    seen[static_cast<size_t>(r)] = true;
  }
  if (!seen[static_cast<size_t>(c.rank)]) {
    throw Error(ErrorCode::InvalidArgument, what + ": this rank is not in the list (non-members do not call make_team)");
  }
  // Pairwise handshakes through the store: with each other member, the k-th make_team both took part
  // in. Every member posts its list (the first member also the new team's id, from a job-wide counter).
  if (c.team_handshakes.empty()) c.team_handshakes.assign(static_cast<size_t>(c.nranks), 0);
  std::vector<uint8_t> blob(8 + ranks.size() * 4);
  uint64_t id = 0;
  if (ranks[0] == c.rank) {
    try {
      id = static_cast<uint64_t>(c.bs->store().add("rwin.coll.team_id", 1));
    } catch (const bootstrap::BootstrapError& e) {
      throw c.store_error(e, what);
    }
  }
  std::memcpy(blob.data(), &id, 8);
  std::memcpy(blob.data() + 8, ranks.data(), ranks.size() * 4);
  std::vector<std::string> keys;
  std::vector<int> from;
  for (int r : ranks) {
    if (r == c.rank) continue;
    const uint64_t k = c.team_handshakes[static_cast<size_t>(r)]++;
    keys.push_back("rwin.coll.mk." + std::to_string(r) + "." + std::to_string(c.rank) + "." + std::to_string(k));
    from.push_back(r);
    c.bs->store().set("rwin.coll.mk." + std::to_string(c.rank) + "." + std::to_string(r) + "." + std::to_string(k), blob);
  }
  std::vector<bootstrap::Bytes> got;
  if (!keys.empty()) {
    // (The first key is set again by store_collect; the value is the same.)
    const std::string mine = "rwin.coll.mk." + std::to_string(c.rank) + "." + std::to_string(from[0]) + "." +
                             std::to_string(c.team_handshakes[static_cast<size_t>(from[0])] - 1);
    got = store_collect(c, mine, blob, keys, from, "make_team");
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& g = got[i];
    std::vector<int> theirs((g.size() - 8) / 4);
    if (g.size() >= 8 && !theirs.empty()) std::memcpy(theirs.data(), g.data() + 8, theirs.size() * 4);
    if (theirs != ranks) {
      throw Error(ErrorCode::CollectiveMismatch, what + ": rank " + std::to_string(from[i]) + " passed " +
                                                     list_str(theirs) + ", this rank " + list_str(ranks));
    }
    if (from[i] == ranks[0]) std::memcpy(&id, g.data(), 8);
  }
  return Team(new_team(ctx, id, ranks));
}

// ---------------------------------------------------------------------------------------------
// Names

const char* reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Prod: return "prod";
  }
  return "?";
}

ReduceOp parse_reduce_op(const std::string& name) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod}) {
    if (name == reduce_op_name(op)) return op;
  }
  throw Error(ErrorCode::InvalidArgument, "unknown reduce op '" + name + "' (sum, max, min, prod)");
}

AllreduceMode parse_allreduce_mode(const std::string& name) {
  if (name == "auto") return AllreduceMode::Auto;
  if (name == "mesh") return AllreduceMode::Mesh;
  if (name == "ring") return AllreduceMode::Ring;
  if (name == "bruck") return AllreduceMode::Bruck;
  throw Error(ErrorCode::InvalidArgument, "unknown allreduce mode '" + name + "' (auto, mesh, ring, bruck)");
}

}  // namespace rwin

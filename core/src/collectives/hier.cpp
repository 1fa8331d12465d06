// Two-level gathering for teams across hosts (issue 27, "hierarchy"). A flat algorithm has every member
// talk to members on other hosts: Bruck's log2 NR rounds each cross the link, so a 2 x 4 allreduce of 8
// bytes paid ~3 cross-host latencies per member where Open MPI pays about one. Here each member gives
// its row to its host's leader (shared memory: a few stores), the leaders exchange their hosts' rows
// (one message to each other leader: the only traffic across hosts), and each leader hands every row
// to its members. Every member then holds all NR rows, so allreduce reduces them itself in team-rank
// order: the same bits as Mesh and Bruck, on every member.
//
// Hosts come from what every rank published at start-up (core/src/context.cpp: RWIN_HOST_ID, else the
// boot id), so every member of a team sees the same layout and makes the same choice for a call of
// the same size. Every phase is an exchange of this call (phases 64-66) whose headers carry the call's
// kind, count, type, op and mode, so members whose calls differ find it at the first message.
// all_to_all goes the same three steps with its blocks sorted by destination at the leaders (below).
//
// Larger reductions go as a chain along the hosts instead (hier_chain_*, below): gathering NR vectors
// stops paying above RWIN_COLL_HIER_MAX, and the flat Ring sends (NR - 1) / NR of the vector from every
// member, half of it across hosts, where the chain sends one fold per lane across each pair of hosts.
#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>

#include "collectives/reduce_math.h"
#include "collectives/team_state.h"
#include "context_impl.h"

namespace rwin::detail {

namespace {

void ensure_hosts(TeamState& t) {
  TeamState::Hosts& H = t.hosts;
  if (H.ready) return;
  const std::vector<int>& job_host = t.c->host_of;
  std::vector<int> seen;  // job host numbers, in order of first appearance in the team
  H.host_of.assign(static_cast<size_t>(t.nr), 0);
  for (int q = 0; q < t.nr; ++q) {
    const size_t r = static_cast<size_t>(t.ranks[static_cast<size_t>(q)]);
    const int jh = r < job_host.size() ? job_host[r] : 0;
    auto it = std::find(seen.begin(), seen.end(), jh);
    if (it == seen.end()) {
      it = seen.insert(seen.end(), jh);
      H.leader.push_back(q);
      H.members.emplace_back();
    }
    const int h = static_cast<int>(it - seen.begin());
    H.host_of[static_cast<size_t>(q)] = h;
    H.members[static_cast<size_t>(h)].push_back(q);
  }
  bool shared = false;
  for (const auto& m : H.members) shared = shared || m.size() > 1;
  H.pays = H.members.size() > 1 && shared;
  // The chain needs the fold order (team-rank order) to visit each host once: hosts of one size, each a
  // run of consecutive team ranks (what a launcher that fills hosts in turn gives the world team).
  const size_t L = H.members[0].size();
  H.chain = H.members.size() > 1 && L > 1;
  for (int q = 0; q < t.nr && H.chain; ++q) {
    const int h = H.host_of[static_cast<size_t>(q)];
    H.chain = H.members[static_cast<size_t>(h)].size() == L && h == q / static_cast<int>(L);
  }
  H.ready = true;
}

// One exchange of this call: `out` flows of plain memory, `in` flows consumed into `dst` at each
// flow's offset (staged sends: nothing of the caller's is read after it returns, so no acks are awaited).
using Flow = TeamState::HierFlow;
void exchange(TeamState& t, const MsgHeader& h, uint8_t phase, const std::vector<Flow>& out, const std::vector<Flow>& in,
              const char* what) {
  if (out.empty() && in.empty()) return;
  Exchange ex;
  ex.header = h;
  ex.header.phase = phase;
  for (const Flow& f : out) {
    OutFlow o{f.peer, nullptr, 0, f.bytes};
    o.raw = f.src;
    ex.out.push_back(o);
  }
  for (const Flow& f : in) ex.in.push_back(InFlow{f.peer, f.bytes});
  const uint64_t cp = chunk_payload(t);
  auto consume = [&in, cp](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (lens[i]) std::memcpy(in[i].dst + j * cp, parts[i], lens[i]);
    }
  };
  ex.consume = consume;
  ex.final_acks = false;
  run_exchange(t, ex, what);
}

}  // namespace

bool hier_pays(TeamState& t, TunedColl coll, uint64_t bytes) {
  // allgather's rows and broadcast's vectors up to 16x the limit, all_to_all's stages up to 4x: measured
  // ahead of the flat messages at rows of 4 B-256 KiB, broadcasts of 8 B-64 KiB and stages up to 64 KiB
  // (2 x 2 and 2 x 4 ranks), where allreduce's and reduce_scatter's gathering of NR vectors fell behind
  // the flat algorithms above 16 KiB (bench/RESULTS.md, "Small collectives through the host leaders").
  const int shift = coll == TunedColl::Allgather || coll == TunedColl::Broadcast ? 4 : coll == TunedColl::AllToAll ? 2 : 0;
  const uint64_t limit = t.cfg.hier_max > (UINT64_MAX >> shift) ? UINT64_MAX : t.cfg.hier_max << shift;
  if (t.nr < 3 || bytes > limit) return false;
  bool users = false;
  (void)t.algo(coll, bytes, &users);
  if (users) return false;  // a rule of the user's tuning file names the algorithm
  ensure_hosts(t);
  return t.hosts.pays;
}

void hier_allgather(TeamState& t, const MsgHeader& h, const char* mine, uint64_t row, char* g, const char* what) {
  ensure_hosts(t);
  const TeamState::Hosts& H = t.hosts;
  const auto nr = static_cast<uint64_t>(t.nr);
  auto row_of = [g, row](int q) { return g + static_cast<uint64_t>(q) * row; };
  if (row) std::memmove(row_of(t.me), mine, row);
  const int host = H.host_of[static_cast<size_t>(t.me)];
  const int leader = H.leader[static_cast<size_t>(host)];
  const std::vector<int>& local = H.members[static_cast<size_t>(host)];
  std::vector<Flow>& out = t.hier_out;  // kept in the team: a small call allocates nothing
  std::vector<Flow>& in = t.hier_in;
  out.clear();
  in.clear();
  // 1. Every member's row to its leader.
  if (t.me != leader) {
    out.push_back(Flow{leader, mine, nullptr, row});
  } else {
    for (int q : local) {
      if (q != t.me) in.push_back(Flow{q, nullptr, row_of(q), row});
    }
  }
  exchange(t, h, 64, out, in, what);
  // 2. Leaders: this host's rows (ascending team rank) to every other leader, theirs from them.
  if (t.me == leader && H.members.size() > 1) {
    out.clear();
    in.clear();
    t.pack_out.resize(static_cast<size_t>(local.size() * row));
    for (size_t i = 0; i < local.size() && row; ++i) std::memcpy(t.pack_out.data() + i * row, row_of(local[i]), row);
    uint64_t total = 0;
    for (size_t k = 0; k < H.members.size(); ++k) {
      if (static_cast<int>(k) != host) total += H.members[k].size() * row;
    }
    t.pack_in.resize(static_cast<size_t>(total));
    uint64_t at = 0;
    for (size_t k = 0; k < H.members.size(); ++k) {
      if (static_cast<int>(k) == host) continue;
      out.push_back(Flow{H.leader[k], t.pack_out.data(), nullptr, local.size() * row});
      in.push_back(Flow{H.leader[k], nullptr, t.pack_in.data() + at, H.members[k].size() * row});
      at += H.members[k].size() * row;
    }
    exchange(t, h, 65, out, in, what);
    at = 0;
    for (size_t k = 0; k < H.members.size(); ++k) {
      if (static_cast<int>(k) == host) continue;
      for (int q : H.members[k]) {
        if (row) std::memcpy(row_of(q), t.pack_in.data() + at, row);
        at += row;
      }
    }
  }
  // 3. Every row from the leader to its members.
  out.clear();
  in.clear();
  if (t.me == leader) {
    for (int q : local) {
      if (q != t.me) out.push_back(Flow{q, g, nullptr, nr * row});
    }
  } else {
    in.push_back(Flow{leader, nullptr, g, nr * row});
  }
  exchange(t, h, 66, out, in, what);
}

void hier_all_to_all(TeamState& t, const MsgHeader& h, const char* stage, char* data, uint64_t block, const char* what) {
  ensure_hosts(t);
  const TeamState::Hosts& H = t.hosts;
  const auto nr = static_cast<uint64_t>(t.nr);
  const uint64_t whole = nr * block;  // a member's stage, and what it receives
  const int host = H.host_of[static_cast<size_t>(t.me)];
  const int leader = H.leader[static_cast<size_t>(host)];
  const std::vector<int>& local = H.members[static_cast<size_t>(host)];
  std::vector<Flow>& out = t.hier_out;  // kept in the team: a small call allocates nothing
  std::vector<Flow>& in = t.hier_in;
  out.clear();
  in.clear();
  if (t.me != leader) {
    // 1. The whole stage to the leader; 3. every block addressed here back from it.
    out.push_back(Flow{leader, stage, nullptr, whole});
    exchange(t, h, 64, out, in, what);
    out.clear();
    in.push_back(Flow{leader, nullptr, data, whole});
    exchange(t, h, 66, out, in, what);
    return;
  }
  // The leader: local members' stages in t.hier (local index i at i x whole).
  const uint64_t nl = local.size();
  t.hier.resize(static_cast<size_t>(nl * whole));
  char* stages = t.hier.data();
  for (size_t i = 0; i < nl; ++i) {
    if (local[i] == t.me) {
      if (whole) std::memcpy(stages + i * whole, stage, whole);
    } else {
      in.push_back(Flow{local[i], nullptr, stages + i * whole, whole});
    }
  }
  exchange(t, h, 64, out, in, what);
  // 2. To each other host's leader: for each local member a (ascending), its blocks for that host's
  // members (ascending); from it, for each of its members, their blocks for ours.
  out.clear();
  in.clear();
  uint64_t out_bytes = 0, in_bytes = 0;
  for (size_t k = 0; k < H.members.size(); ++k) {
    if (static_cast<int>(k) == host) continue;
    out_bytes += nl * H.members[k].size() * block;
    in_bytes += H.members[k].size() * nl * block;
  }
  t.pack_out.resize(static_cast<size_t>(out_bytes));
  t.pack_in.resize(static_cast<size_t>(in_bytes));
  uint64_t oat = 0, iat = 0;
  for (size_t k = 0; k < H.members.size(); ++k) {
    if (static_cast<int>(k) == host) continue;
    const std::vector<int>& theirs = H.members[k];
    const uint64_t n_out = nl * theirs.size() * block;
    char* o = t.pack_out.data() + oat;
    for (size_t i = 0; i < nl && block; ++i) {
      for (size_t j = 0; j < theirs.size(); ++j) {
        std::memcpy(o + (i * theirs.size() + j) * block, stages + i * whole + static_cast<uint64_t>(theirs[j]) * block, block);
      }
    }
    out.push_back(Flow{H.leader[k], o, nullptr, n_out});
    in.push_back(Flow{H.leader[k], nullptr, t.pack_in.data() + iat, theirs.size() * nl * block});
    oat += n_out;
    iat += theirs.size() * nl * block;
  }
  exchange(t, h, 65, out, in, what);
  // 3. Each local member b gets row s = member s's block for b: from a local stage, or from the block
  // s's leader sent (its members in order, each with one block per member of ours).
  t.pack_out.resize(static_cast<size_t>(nl * whole));
  for (size_t bi = 0; bi < nl && block; ++bi) {
    char* row = local[bi] == t.me ? data : t.pack_out.data() + bi * whole;
    for (size_t li = 0; li < nl; ++li) {
      std::memcpy(row + static_cast<uint64_t>(local[li]) * block, stages + li * whole + static_cast<uint64_t>(local[bi]) * block, block);
    }
    iat = 0;
    for (size_t k = 0; k < H.members.size(); ++k) {
      if (static_cast<int>(k) == host) continue;
      const std::vector<int>& theirs = H.members[k];
      for (size_t a = 0; a < theirs.size(); ++a) {
        std::memcpy(row + static_cast<uint64_t>(theirs[a]) * block, t.pack_in.data() + iat + (a * nl + bi) * block, block);
      }
      iat += theirs.size() * nl * block;
    }
  }
  out.clear();
  in.clear();
  for (size_t bi = 0; bi < nl; ++bi) {
    if (local[bi] != t.me) out.push_back(Flow{local[bi], t.pack_out.data() + bi * whole, nullptr, whole});
  }
  exchange(t, h, 66, out, in, what);
}

int hier_chain_lanes(TeamState& t) {
  ensure_hosts(t);
  const int L = static_cast<int>(t.hosts.members[0].size());
  if (t.cfg.chain_lanes > 0) return std::min(L, t.cfg.chain_lanes);
  // auto: a lane per CPU of the host with the fewest (the same answer on every member: from what every
  // rank published at start-up). A lane more than a host has CPUs for only adds a message to wait for
  // in every phase: 2 x 4 ranks on one CPU per host, 1 lane ahead of 2 at 4 of 5 sizes from 64 KiB to
  // 16 MiB (64 KiB 1.22 against 1.11x Open MPI), 4 lanes behind 2 at 64 and 256 KiB (0.82 against
  // 1.10x) (bench/RESULTS.md, "Large reductions along the hosts").
  const int cpus = t.c->min_host_cpus;
  return cpus > 0 ? std::min(L, cpus) : L;
}

bool hier_chain_pays(TeamState& t, TunedColl coll, uint64_t bytes) {
  if (t.nr < 4 || t.cfg.hier_max == 0 || bytes <= t.cfg.hier_max) return false;
  bool users = false;
  (void)t.algo(coll, bytes, &users);
  if (users) return false;  // a rule of the user's tuning file names the algorithm
  ensure_hosts(t);
  if (!t.hosts.chain) return false;
  if (coll != TunedColl::ReduceScatter) return true;
  // reduce_scatter's chain carries every host's rows through every host: NR rows out of each host
  // where the flat exchange sends L (NR - L); only where that is at least twice the chain's (2 x 4
  // ranks: 1.45x Open MPI at 1 MiB against 0.96x flat; 2 x 2: 1.03 against 1.11, 16 MiB 1.90 against
  // 2.60; bench/RESULTS.md).
  const auto L = static_cast<uint64_t>(t.hosts.members[0].size()), H = static_cast<uint64_t>(t.hosts.members.size());
  return L * (H - 1) >= 2 * H;
}

namespace {

// Words of a chain offer: the view's base, bytes, mapped flag; the same of its home; RWIN_COLL_PULL_MIN;
// whether this member's messages to that member are stored straight into its slots.
constexpr int kOffer = 8;

// A run of elements of the view that a chain folds: `off` bytes into it, `elems` elements.
struct ChainPiece {
  uint64_t off = 0, elems = 0;
};

// The chain (hier_chain_allreduce, hier_chain_reduce_scatter). Member i of host k (team rank k L + i)
// folds the pieces piece(i, 0..R-1) of the view `v`, concatenated, over every member's view in
// team-rank order:
//  67  inside each host, offers: where each member's view lies; a member reads its pieces of every
//      member of its host in place where that member's view is its own view's copy in shared memory
//      (the symmetric-memory rule, as pull.h), and
//  72  has the others send them as messages (none, for team windows in shared memory);
//  68  along the hosts: host 0's member i folds its host's L inputs and sends the fold to host 1's
//      member i, which folds its host's inputs onto it, chunk by chunk as they land, and passes it on;
//      the last host stores piece r's result at fin[r] and sends piece deliver(k) to host k's member
//      i, which stores it at `mine`: with two hosts in the same exchange, chunk by chunk as it is
//      made; with more, in phase 69.
// One fold per member crosses each pair of consecutive hosts, and a result back. `home` (allreduce's
// dst, where fin[0] lies at byte home_off): where the type is its own carrier, the fold is made there
// and sent from there, a window, so that it goes out without a copy into the outbox.
void chain(TeamState& t, const MsgHeader& h, ReduceOp op, const WindowState& v, int B, int R,
           const std::function<ChainPiece(int i, int r)>& piece, const std::vector<char*>& fin,
           const std::function<int(int k)>& deliver, char* mine, const WindowState* home, uint64_t home_off,
           const char* what) {
  const TeamState::Hosts& H = t.hosts;
  const int nh = static_cast<int>(H.members.size());
  const int L = static_cast<int>(H.members[0].size());
  const int host = t.me / L, i = t.me % L;
  const DType dtype = v.dtype;
  const uint64_t es = dtype_size(dtype), cs = fold_carrier_size(dtype);
  const char* src = v.base();
  auto total = [&](int b) {
    uint64_t n = 0;
    for (int r = 0; r < R; ++r) n += piece(b, r).elems;
    return n;
  };
  const bool folds = i < B;
  std::vector<uint64_t> pre(static_cast<size_t>(R) + 1, 0);  // where piece r starts in the fold
  for (int r = 0; r < R && folds; ++r) pre[static_cast<size_t>(r) + 1] = pre[static_cast<size_t>(r)] + piece(i, r).elems;
  const uint64_t N = pre.back();
  uint64_t most = 0;
  for (int b = 0; b < B; ++b) most = std::max(most, total(b));
  ensure_workspace(t, most * cs, &h);
  std::vector<Flow>& out = t.hier_out;
  std::vector<Flow>& in = t.hier_in;
  // 67: offers to this host's members: {where the view starts as this member's key publishes it, its
  // bytes, whether that member's copy is mapped here}, and the same of `home`. A member reads from b
  // where it maps b and their views are copies, which both ends can tell from the offers: one round,
  // no verdicts.
  std::vector<uint64_t>& w = t.chain_words;  // kOffer words offered to each local member, then from each
  w.assign(static_cast<size_t>(2 * kOffer * L), 0);
  out.clear();
  in.clear();
  for (int b = 0; b < L; ++b) {
    if (b == i) continue;
    const int q = host * L + b;
    uint64_t* o = &w[static_cast<size_t>(kOffer * b)];
    const int gq = t.ranks[static_cast<size_t>(q)];
    o[0] = v.remote_base(t.c->rank);
    o[1] = v.bytes;
    o[2] = v.mapped(gq) != nullptr;
    if (home) {
      o[3] = home->remote_base(t.c->rank);
      o[4] = home->bytes;
      o[5] = home->mapped(gq) != nullptr;
    }
    o[6] = t.cfg.pull_min;
    o[7] = messages_stored(t, q);
    out.push_back(Flow{q, reinterpret_cast<const char*>(o), nullptr, 8 * kOffer});
    in.push_back(Flow{q, nullptr, reinterpret_cast<char*>(&w[static_cast<size_t>(kOffer * (L + b))]), 8 * kOffer});
  }
  exchange(t, h, 67, out, in, what);
  // Both ends of a pair decide alone whether a piece is read in place, from RWIN_COLL_PULL_MIN: members
  // whose settings differ would wait for messages never sent. Found here, named, on every member.
  for (int b = 0; b < L; ++b) {
    const uint64_t theirs = w[static_cast<size_t>(kOffer * (L + b) + 6)];
    if (b != i && theirs != t.cfg.pull_min) {
      report_mismatch(t, host * L + b, h, h, what,
                      peer_name(t, host * L + b) + " has RWIN_COLL_PULL_MIN=" + std::to_string(theirs) + ", " +
                          peer_name(t, t.me) + " RWIN_COLL_PULL_MIN=" + std::to_string(t.cfg.pull_min) +
                          " (the chain along the hosts needs the same on every member)");
    }
  }
  auto copies = [&](int b) {  // b's view is this one's copy
    const uint64_t* th = &w[static_cast<size_t>(kOffer * (L + b))];
    return th[0] == v.remote_base(t.ranks[static_cast<size_t>(host * L + b)]) && th[1] == v.bytes;
  };
  // Reads of at least RWIN_COLL_PULL_MIN bytes (the reader's pieces) only, as the other pull paths.
  auto big = [&t, es](uint64_t elems) { return t.cfg.pull_min != 0 && elems * es >= t.cfg.pull_min; };
  auto i_pull = [&](int b) {
    return big(N) && copies(b) && v.mapped(t.ranks[static_cast<size_t>(host * L + b)]) != nullptr;
  };
  auto b_pulls = [&](int b) { return big(total(b)) && copies(b) && w[static_cast<size_t>(kOffer * (L + b) + 2)] != 0; };
  // 72: the pieces that cannot be read in place, packed (one flow per member and phase); b's at t.hier
  // + b x most elements.
  t.hier.resize(static_cast<size_t>(static_cast<uint64_t>(L) * most * es));
  t.pack_out.resize(static_cast<size_t>(static_cast<uint64_t>(L) * most * es));
  out.clear();
  in.clear();
  for (int b = 0; b < L; ++b) {
    if (b == i) continue;
    const int q = host * L + b;
    if (b < B && !b_pulls(b)) {
      char* pk = t.pack_out.data() + static_cast<uint64_t>(b) * most * es;
      uint64_t at = 0;
      for (int r = 0; r < R; ++r) {
        const ChainPiece pc = piece(b, r);
        if (pc.elems) std::memcpy(pk + at, src + pc.off, pc.elems * es);
        at += pc.elems * es;
      }
      out.push_back(Flow{q, pk, nullptr, at});
    }
    if (folds && !i_pull(b)) in.push_back(Flow{q, nullptr, t.hier.data() + static_cast<uint64_t>(b) * most * es, N * es});
  }
  exchange(t, h, 72, out, in, what);
  if (!folds) return;
  // input(b, r): where member b's piece r of this member's can be read.
  auto input = [&](int b, int r) -> const char* {
    if (b == i) return src + piece(i, r).off;
    if (i_pull(b)) return v.mapped(t.ranks[static_cast<size_t>(host * L + b)]) + piece(i, r).off;
    return t.hier.data() + static_cast<uint64_t>(b) * most * es + pre[static_cast<size_t>(r)] * es;
  };
  const int prev = host > 0 ? t.me - L : -1;
  const bool last = host == nh - 1;
  const bool at_home = home && cs == es && R == 1;
  if (!at_home) t.pack_out.resize(static_cast<size_t>(N * cs));
  char* carry = at_home ? home->base() + home_off : t.pack_out.data();  // the fold this member passes on
  std::vector<const void*>& at = t.inputs;
  at.assign(static_cast<size_t>(L), nullptr);
  // Folds elements [a, a + m) of the concatenation onto `acc` (null: from the first input) into the
  // carried fold (pack_out) or, on the last host, the results (fin).
  auto fold = [&](uint64_t a, uint64_t m, const char* acc) {
    for (int r = 0; r < R && m; ++r) {
      const uint64_t p0 = pre[static_cast<size_t>(r)], p1 = pre[static_cast<size_t>(r) + 1];
      const uint64_t x = std::max(a, p0), y = std::min(a + m, p1);
      if (x >= y) continue;
      for (int b = 0; b < L; ++b) at[static_cast<size_t>(b)] = input(b, r) + (x - p0) * es;
      void* o = last ? static_cast<void*>(fin[static_cast<size_t>(r)] + (x - p0) * es) : carry + x * cs;
      reduce_fold(dtype, op, acc ? acc + (x - a) * cs : nullptr, at.data(), L, y - x, o, !last);
    }
  };
  // 68: host 0 folds all of it first (its inputs are all here), the others as the fold lands.
  if (prev < 0) fold(0, N, nullptr);
  const uint64_t cp = chunk_payload(t);
  const uint64_t per = cp / cs;  // elements per chunk of the carried fold (cp: a multiple of 64)
  uint64_t done = prev < 0 ? N : 0;  // elements folded so far
  uint64_t ready_on = prev < 0 ? UINT64_MAX : 0;  // chunks of the fold to pass on, made so far
  std::vector<uint64_t> ready_to(static_cast<size_t>(nh), 0);  // last host: chunks of each result made so far
  auto on_fold = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
    // parts[0]: chunk j of the fold carried from the previous host (elements [j per, ...)).
    const uint64_t a = j * per, m = lens[0] / cs;
    fold(a, m, parts[0]);
    done = a + m;
    ready_on = done >= N ? UINT64_MAX : j + 1;
    if (!last) return;
    for (int k = 0; k < nh - 1; ++k) {  // the result piece for host k, in chunks of `es`-sized elements
      const auto r = static_cast<size_t>(deliver(k));
      const uint64_t made = done > pre[r] ? std::min(done, pre[r + 1]) - pre[r] : 0;
      ready_to[static_cast<size_t>(k)] = done >= pre[r + 1] ? UINT64_MAX : made * es / cp;
    }
  };
  const uint64_t mine_bytes = host < nh - 1 ? piece(i, deliver(host)).elems * es : 0;
  auto copy = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
    if (lens[0]) std::memcpy(mine + j * cp, parts[0], lens[0]);
  };
  {
    std::optional<ByteView> hb;
    if (at_home) hb.emplace(*home);
    Exchange ex;
    ex.header = h;
    ex.header.phase = 68;
    if (prev >= 0) ex.in.push_back(InFlow{prev, N * cs});
    if (!last) {
      OutFlow f{t.me + L, nullptr, 0, N * cs};
      if (at_home) {
        f.src = hb->ptr();
        f.offset = home_off;
      } else {
        f.raw = carry;
      }
      f.ready = &ready_on;
      ex.out.push_back(f);
    } else if (nh == 2) {
      const int r = deliver(0);
      OutFlow f{t.me - L, nullptr, 0, piece(i, r).elems * es};
      if (at_home) {
        f.src = hb->ptr();
        f.offset = home_off;
      } else {
        f.raw = fin[static_cast<size_t>(r)];
      }
      f.ready = &ready_to[0];
      ex.out.push_back(f);
    }
    if (nh == 2 && host == 0) ex.in.push_back(InFlow{t.me + L, mine_bytes});
    if (prev >= 0) {
      ex.consume = on_fold;
    } else if (!ex.in.empty()) {
      ex.consume = copy;
    }
    ex.final_acks = false;
    run_exchange(t, ex, what);
  }
  // 69: more than two hosts: each result from the last host's member i to the other hosts' member i.
  if (nh > 2) {
    out.clear();
    in.clear();
    if (last) {
      for (int k = 0; k < nh - 1; ++k) {
        const int r = deliver(k);
        out.push_back(Flow{k * L + i, fin[static_cast<size_t>(r)], nullptr, piece(i, r).elems * es});
      }
    } else {
      in.push_back(Flow{(nh - 1) * L + i, nullptr, mine, mine_bytes});
    }
    exchange(t, h, 69, out, in, what);
  }
}

// After chain(): member b of this host's offer (kOffer words, still in t.chain_words), and b's job rank.
const uint64_t* offer_of(const TeamState& t, int b, int& gq) {
  const int L = static_cast<int>(t.hosts.members[0].size());
  gq = t.ranks[static_cast<size_t>(t.me / L * L + b)];
  return &t.chain_words[static_cast<size_t>(kOffer * (L + b))];
}

// Whether this member read `bytes` of member b's copy of the chain's view `v` in place (from_b), or b as
// many of this member's (!from_b), as chain() decided (reads of at least RWIN_COLL_PULL_MIN bytes).
bool in_place(TeamState& t, const WindowState& v, int b, bool from_b, uint64_t bytes) {
  if (t.cfg.pull_min == 0 || bytes < t.cfg.pull_min) return false;
  int gq = 0;
  const uint64_t* th = offer_of(t, b, gq);
  const bool copies = th[0] == v.remote_base(gq) && th[1] == v.bytes;
  return copies && (from_b ? v.mapped(gq) != nullptr : th[2] != 0);
}

// Whether a lane writes its result block (`bytes`) straight into a member's dst (hier_chain_allreduce's
// phase 70). Both ends compute it, from the other's offer: this member is the lane (i_write) or the
// member, `other` the other end.
bool writes_into(TeamState& t, const WindowState& dv, int other, bool i_write, uint64_t bytes) {
  if (t.cfg.pull_min == 0 || bytes < t.cfg.pull_min) return false;
  int gq = 0;
  const uint64_t* th = offer_of(t, other, gq);
  if (th[3] != dv.remote_base(gq) || th[4] != dv.bytes) return false;  // not copies of one view
  const int L = static_cast<int>(t.hosts.members[0].size());
  return i_write ? dv.mapped(gq) != nullptr && messages_stored(t, t.me / L * L + other) : th[5] != 0 && th[7] != 0;
}

}  // namespace

// allreduce: lane i (member i < B of every host, B = the header's lanes) folds block i of the vector
// (elements [i n / B, (i + 1) n / B)); then
//  70  inside each host, every member's result block to every other member.
// Nobody changes its src before every member of its host has read from it: a member writes its dst
// (in place: its src) only with results, which come after every fold of its host's src blocks.
void hier_chain_allreduce(TeamState& t, const MsgHeader& h, ReduceOp op, const WindowState& sv, const WindowState& dv,
                          const char* what) {
  ensure_hosts(t);
  const int L = static_cast<int>(t.hosts.members[0].size());
  const int i = t.me % L, host = t.me / L;
  const uint64_t es = dtype_size(sv.dtype);
  const uint64_t n = sv.bytes / es;
  const int B = h.root;  // hier_chain_lanes(t), in the header
  auto first = [n, B](int b) { return static_cast<uint64_t>(b) * n / static_cast<uint64_t>(B); };
  auto block = [&first, es](int b, int) { return ChainPiece{first(b) * es, first(b + 1) - first(b)}; };
  char* dst = dv.base();
  char* result = i < B ? dst + first(i) * es : nullptr;
  chain(t, h, op, sv, B, 1, block, {result}, [](int) { return 0; }, result, &dv, i < B ? first(i) * es : 0, what);
  // 70: each lane's result block to its host's other members: written straight into the member's dst
  // where that is the lane's dst's copy mapped at the lane, whose messages to the member are stored into
  // the member's slots (so the 8-byte message that follows is stored after the block), and the block
  // is at least RWIN_COLL_PULL_MIN; else as a message.
  std::vector<Flow>& out = t.hier_out;
  std::vector<Flow>& in = t.hier_in;
  auto bytes = [&block, es](int b) { return block(b, 0).elems * es; };
  static const uint64_t kWritten = 1;
  std::vector<uint64_t>& flags = t.chain_done;
  flags.assign(static_cast<size_t>(L), 0);
  out.clear();
  in.clear();
  for (int b = 0; b < L; ++b) {
    if (b == i) continue;
    const int q = host * L + b;
    if (i < B) {
      if (writes_into(t, dv, b, true, bytes(i))) {
        if (bytes(i)) std::memcpy(dv.mapped(t.ranks[static_cast<size_t>(q)]) + first(i) * es, result, bytes(i));
        out.push_back(Flow{q, reinterpret_cast<const char*>(&kWritten), nullptr, 8});
      } else {
        out.push_back(Flow{q, result, nullptr, bytes(i)});
      }
    }
    if (b < B) {
      in.push_back(writes_into(t, dv, b, false, bytes(b))
                       ? Flow{q, nullptr, reinterpret_cast<char*>(&flags[static_cast<size_t>(b)]), 8}
                       : Flow{q, nullptr, dst + first(b) * es, bytes(b)});
    }
  }
  exchange(t, h, 70, out, in, what);
}

// reduce_scatter: member i of every host folds the rows of the host's member i (rows k L + i, k = 0..H-1)
// and the last host gives each its row; then
//  73  every member tells those of its host that read its data in place that it is done with theirs
//      (none changes its data before: the caller may once it returns).
void hier_chain_reduce_scatter(TeamState& t, const MsgHeader& h, ReduceOp op, const WindowState& dv, char* out_row,
                               const char* what) {
  ensure_hosts(t);
  const int L = static_cast<int>(t.hosts.members[0].size());
  const int nh = static_cast<int>(t.hosts.members.size());
  const int i = t.me % L, host = t.me / L;
  const uint64_t rb = dv.bytes / static_cast<uint64_t>(t.nr);
  const uint64_t S = rb / dtype_size(dv.dtype);
  auto row = [rb, S, L](int b, int r) { return ChainPiece{static_cast<uint64_t>(r * L + b) * rb, S}; };
  // The last host's results: its own row at out_row, the others' staged (sent from there).
  std::vector<char*> fin(static_cast<size_t>(nh), nullptr);
  if (host == nh - 1) {
    t.pack_in.resize(static_cast<size_t>(rb * static_cast<uint64_t>(nh)));
    for (int k = 0; k < nh; ++k) fin[static_cast<size_t>(k)] = k == host ? out_row : t.pack_in.data() + static_cast<uint64_t>(k) * rb;
  }
  chain(t, h, op, dv, L, nh, row, fin, [](int k) { return k; }, out_row, nullptr, 0, what);
  std::vector<Flow>& out = t.hier_out;
  std::vector<Flow>& in = t.hier_in;
  out.clear();
  in.clear();
  static const uint64_t kDone = 1;
  std::vector<uint64_t>& got = t.chain_done;
  got.assign(static_cast<size_t>(L), 0);
  for (int b = 0; b < L; ++b) {
    if (b == i) continue;
    const int q = host * L + b;
    if (in_place(t, dv, b, true, static_cast<uint64_t>(nh) * rb)) out.push_back(Flow{q, reinterpret_cast<const char*>(&kDone), nullptr, 8});
    if (in_place(t, dv, b, false, static_cast<uint64_t>(nh) * rb)) in.push_back(Flow{q, nullptr, reinterpret_cast<char*>(&got[static_cast<size_t>(b)]), 8});
  }
  exchange(t, h, 73, out, in, what);
}

const TeamState::Hosts* hier_hosts(TeamState& t) {
  if (t.nr < 3 || t.cfg.hier_max == 0) return nullptr;
  ensure_hosts(t);
  return t.hosts.pays ? &t.hosts : nullptr;
}

int hier_parent(TeamState& t, int root) {
  ensure_hosts(t);
  const TeamState::Hosts& H = t.hosts;
  if (t.me == root) return -1;
  const int host = H.host_of[static_cast<size_t>(t.me)];
  const int leader = H.leader[static_cast<size_t>(host)];
  return host == H.host_of[static_cast<size_t>(root)] || t.me == leader ? root : leader;
}

const std::vector<int>& hier_children(TeamState& t, int root) {
  ensure_hosts(t);
  const TeamState::Hosts& H = t.hosts;
  std::vector<int>& kids = t.hier_kids;
  kids.clear();
  const int host = H.host_of[static_cast<size_t>(t.me)];
  const int root_host = H.host_of[static_cast<size_t>(root)];
  if (t.me == root) {
    // The other hosts' leaders first: each forwards to its host, so they start before the local copies.
    for (size_t k = 0; k < H.members.size(); ++k) {
      if (static_cast<int>(k) != root_host) kids.push_back(H.leader[k]);
    }
    for (int q : H.members[static_cast<size_t>(host)]) {
      if (q != t.me) kids.push_back(q);
    }
  } else if (host != root_host && t.me == H.leader[static_cast<size_t>(host)]) {
    for (int q : H.members[static_cast<size_t>(host)]) {
      if (q != t.me) kids.push_back(q);
    }
  }
  return kids;
}

}  // namespace rwin::detail

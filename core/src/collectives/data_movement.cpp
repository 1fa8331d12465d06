// barrier, broadcast, allgather, all_to_all: the collectives that move data without reducing it.
#include <cstring>

#include "collectives/call.h"

namespace rwin {

using namespace detail;

void Team::barrier() {
  TeamState& t = team_of(s_, "barrier");
  MsgHeader h = begin_call(t, CollKind::Barrier, "barrier");  // (not sent: compared with what others send)
  try {
    team_barrier(t, "barrier", &h);
  } catch (const Error& e) {
    fail_call(t, e.what());
    throw;
  }
}

// Small: the root puts to every member directly (one message latency). Large (more than one chunk,
// three or more members): a pipelined chain root -> root+1 -> ... in team-rank order, each member
// forwarding chunk j from its own x as soon as it landed, so every link carries the data once.
void Team::broadcast(const Window& xw, int root) {
  TeamState& t = team_of(s_, "broadcast");
  Call call{t, "broadcast"};
  WindowState& x = call.window(xw, "x");
  if (root < 0 || root >= t.nr) {
    throw Error(ErrorCode::InvalidArgument, call.head() + ": root " + std::to_string(root) + " is not a team rank (0.." +
                                                std::to_string(t.nr - 1) + ")");
  }
  call.run(CollKind::Broadcast, [&](MsgHeader& h) {
    h.dtype = static_cast<uint8_t>(x.dtype);
    h.count = Call::elements(x);
    h.root = root;
    if (t.nr == 1) return;
    ensure_workspace(t, x.bytes, &h);
    auto xb = byte_view(x);
    Exchange ex;
    ex.header = h;
    const bool direct = x.bytes <= chunk_payload(t) || t.nr <= 2;
    const int pos = (t.me - root + t.nr) % t.nr;
    uint64_t ready = 0;
    if (direct) {
      if (t.me == root) {
        for (int p = 0; p < t.nr; ++p) {
          if (p != t.me) ex.out.push_back(OutFlow{p, xb, 0, x.bytes});
        }
      } else {
        ex.in.push_back(InFlow{root, x.bytes});
      }
    } else {
      if (pos > 0) ex.in.push_back(InFlow{(t.me - 1 + t.nr) % t.nr, x.bytes});
      if (pos < t.nr - 1) {
        OutFlow f{(t.me + 1) % t.nr, xb, 0, x.bytes};
        if (pos > 0) f.ready = &ready;
        ex.out.push_back(f);
      }
    }
    const uint64_t cp = chunk_payload(t);
    ex.consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      if (lens[0]) std::memcpy(x.base() + j * cp, parts[0], lens[0]);
      ready = j + 1;
    };
    // Only the senders need the acks (their x is a source); a receiver's header check covers it.
    ex.final_acks = !ex.out.empty();
    run_exchange(t, ex, "broadcast");
  });
}

// Every member puts its stage into every other member's scratch (the same bytes on the wire per
// member as a ring, NR - 1 peers at once, one step), each copies the rows into `data`.
void Team::allgather(const Window& stage_w, const Window& data_w) {
  TeamState& t = team_of(s_, "allgather");
  Call call{t, "allgather"};
  WindowState& st = call.window(stage_w, "stage");
  WindowState& d = call.window(data_w, "data");
  call.same_dtype(st, "stage", d, "data");
  const int64_t s = Call::elements(st);
  if (d.shape[0] != t.nr || d.shape[1] != s) {
    throw Error(ErrorCode::ShapeMismatch, call.head() + ": data " + d.describe() + " must be [" + std::to_string(t.nr) +
                                              ", " + std::to_string(s) + "] (team size x stage elements, stage " +
                                              st.describe() + ")");
  }
  const uint64_t row = st.bytes;
  for (int p = 0; p < t.nr; ++p) {
    if (p != t.me && Call::overlap(st, 0, row, d, static_cast<uint64_t>(p) * row, row)) {
      throw Error(ErrorCode::InvalidArgument, call.head() + ": stage " + st.describe() + " overlaps row " +
                                                  std::to_string(p) + " of data " + d.describe());
    }
  }
  call.run(CollKind::Allgather, [&](MsgHeader& h) {
    h.dtype = static_cast<uint8_t>(st.dtype);
    h.count = s;
    if (row) std::memmove(d.base() + static_cast<uint64_t>(t.me) * row, st.base(), row);
    if (t.nr == 1) return;
    ensure_workspace(t, row, &h);
    auto sb = byte_view(st);
    Exchange ex;
    ex.header = h;
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      ex.out.push_back(OutFlow{p, sb, 0, row});
      ex.in.push_back(InFlow{p, row});
    }
    const uint64_t cp = chunk_payload(t);
    ex.consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      for (size_t i = 0; i < parts.size(); ++i) {
        if (lens[i]) std::memcpy(d.base() + static_cast<uint64_t>(ex.in[i].peer) * row + j * cp, parts[i], lens[i]);
      }
    };
    ex.final_acks = false;  // every pair checks the other's header; sources: see run_exchange
    run_exchange(t, ex, "allgather");
  });
}

// Pairwise: member r puts stage row p to member p, and copies what member q sent into data row q.
void Team::all_to_all(const Window& stage_w, const Window& data_w) {
  TeamState& t = team_of(s_, "all_to_all");
  Call call{t, "all_to_all"};
  WindowState& st = call.window(stage_w, "stage");
  WindowState& d = call.window(data_w, "data");
  call.same_dtype(st, "stage", d, "data");
  if (st.shape[0] != t.nr || d.shape != st.shape) {
    throw Error(ErrorCode::ShapeMismatch, call.head() + ": stage " + st.describe() + " and data " + d.describe() +
                                              " must both be [" + std::to_string(t.nr) + ", S] (team size rows)");
  }
  if (Call::overlap(st, 0, st.bytes, d, 0, d.bytes)) {
    throw Error(ErrorCode::InvalidArgument, call.head() + ": stage " + st.describe() + " and data " + d.describe() +
                                                " overlap (all_to_all is not in place)");
  }
  const uint64_t row = st.bytes / static_cast<uint64_t>(t.nr);
  call.run(CollKind::AllToAll, [&](MsgHeader& h) {
    h.dtype = static_cast<uint8_t>(st.dtype);
    h.count = st.shape[1];
    const uint64_t mine = static_cast<uint64_t>(t.me) * row;
    if (row) std::memcpy(d.base() + mine, st.base() + mine, row);
    if (t.nr == 1) return;
    ensure_workspace(t, row, &h);
    auto sb = byte_view(st);
    Exchange ex;
    ex.header = h;
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      ex.out.push_back(OutFlow{p, sb, static_cast<uint64_t>(p) * row, row});
      ex.in.push_back(InFlow{p, row});
    }
    const uint64_t cp = chunk_payload(t);
    ex.consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      for (size_t i = 0; i < parts.size(); ++i) {
        if (lens[i]) std::memcpy(d.base() + static_cast<uint64_t>(ex.in[i].peer) * row + j * cp, parts[i], lens[i]);
      }
    };
    ex.final_acks = false;
    run_exchange(t, ex, "all_to_all");
  });
}

// ---------------------------------------------------------------------------------------------
// Over the whole job

void barrier_collective(Context& ctx) { world(ctx).barrier(); }
void broadcast(Context& ctx, const Window& x, int root) { world(ctx).broadcast(x, root); }
void allgather(Context& ctx, const Window& stage, const Window& data) { world(ctx).allgather(stage, data); }
void reduce_scatter(Context& ctx, const Window& data, ReduceOp op) { world(ctx).reduce_scatter(data, op); }
void allreduce(Context& ctx, const Window& x, ReduceOp op, AllreduceMode mode) { world(ctx).allreduce(x, op, mode); }
void all_to_all(Context& ctx, const Window& stage, const Window& data) { world(ctx).all_to_all(stage, data); }

}  // namespace rwin

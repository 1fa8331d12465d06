// reduce_scatter and allreduce. Every element is reduced by one member over all members' inputs in
// team-rank order (0, 1, ..., NR-1), so the result does not depend on who computes it or on the
// algorithm: Mesh and Ring give the same bits, and every member holds the same bits.
#include <cstring>

#include "collectives/call.h"
#include "collectives/pull.h"

namespace rwin {

using namespace detail;

namespace {

// Pairwise reduce-scatter over `nr` blocks: block b of `src` (bytes [off(b), off(b+1))) goes to member b;
// member me reduces what arrives with its own block in team-rank order into `out` (its block's bytes).
// The same bytes on the wire per member as a ring reduce-scatter, (NR - 1) / NR of the data, but one
// step instead of NR - 1, and the reduction order is team-rank order whatever the size.
void pairwise_reduce_scatter(TeamState& t, MsgHeader& h, ReduceOp op, DType dtype, const WindowState& src,
                             const std::vector<uint64_t>& off, char* out, bool covered, const char* what) {
  const size_t esz = dtype_size(dtype);
  ByteView sb(src);
  Exchange ex;
  ex.header = h;
  const uint64_t mine = off[static_cast<size_t>(t.me) + 1] - off[static_cast<size_t>(t.me)];
  for (int p = 0; p < t.nr; ++p) {
    if (p == t.me) continue;
    ex.out.push_back(OutFlow{p, sb.ptr(), off[static_cast<size_t>(p)], off[static_cast<size_t>(p) + 1] - off[static_cast<size_t>(p)]});
    ex.in.push_back(InFlow{p, mine});
  }
  const uint64_t cp = chunk_payload(t);
  std::vector<const void*>& inputs = t.inputs;
  inputs.assign(static_cast<size_t>(t.nr), nullptr);
  auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
    const uint64_t len = lens.empty() ? 0 : lens[0];
    if (len == 0) return;
    size_t i = 0;
    for (int q = 0; q < t.nr; ++q) {
      inputs[static_cast<size_t>(q)] = q == t.me ? src.base() + off[static_cast<size_t>(t.me)] + j * cp : parts[i++];
    }
    reduce_arrays(dtype, op, out + j * cp, inputs.data(), t.nr, len / esz);
  };
  ex.consume = consume;
  ex.final_acks = false;
  ex.sources_covered = covered;
  run_exchange(t, ex, what);
}

void check_op(const Call& call, ReduceOp op) {
  if (static_cast<uint8_t>(op) > static_cast<uint8_t>(ReduceOp::Prod)) {
    throw Error(ErrorCode::InvalidArgument, call.head() + ": reduce op code " + std::to_string(static_cast<int>(op)) +
                                                " is not a ReduceOp");
  }
}

void reduce_scatter_impl(TeamState& t, const Window& data_w, const Window* out_w, ReduceOp op) {
  Call call{t, "reduce_scatter"};
  check_op(call, op);
  WindowState& d = call.window(data_w, "data");
  if (d.shape[0] != t.nr) {
    throw Error(ErrorCode::ShapeMismatch, call.head() + ": data " + d.describe() + " must have " + std::to_string(t.nr) +
                                              " rows (one per member)");
  }
  const uint64_t row = d.bytes / static_cast<uint64_t>(t.nr);
  const uint64_t my_off = static_cast<uint64_t>(t.me) * row;
  WindowState* o = nullptr;
  if (out_w) {
    o = &call.window(*out_w, "out");
    call.same_dtype(d, "data", *o, "out");
    if (Call::elements(*o) != d.shape[1]) {
      throw Error(ErrorCode::ShapeMismatch, call.head() + ": out " + o->describe() + " must hold " +
                                                std::to_string(d.shape[1]) + " elements (a row of data " + d.describe() + ")");
    }
    for (int p = 0; p < t.nr; ++p) {
      if (p != t.me && Call::overlap(*o, 0, o->bytes, d, static_cast<uint64_t>(p) * row, row)) {
        throw Error(ErrorCode::InvalidArgument, call.head() + ": out " + o->describe() + " overlaps row " +
                                                    std::to_string(p) + " of data " + d.describe());
      }
    }
  }
  char* out = o ? o->base() : d.base() + my_off;
  call.run(CollKind::ReduceScatter, [&](MsgHeader& h) {
    h.dtype = static_cast<uint8_t>(d.dtype);
    h.count = d.shape[1];
    h.op = static_cast<uint8_t>(op);
    if (t.nr == 1) {
      if (out != d.base() + my_off && row) std::memmove(out, d.base() + my_off, row);
      return;
    }
    if (hier_pays(t, TunedColl::ReduceScatter, d.bytes)) {
      // Across hosts: every member gathers every member's whole data through the host leaders
      // (hier.cpp) and reduces its own row in team-rank order: the pairwise algorithm's bits.
      h.mode = kHierMode;
      const uint64_t all = static_cast<uint64_t>(t.nr) * d.bytes;
      ensure_workspace(t, all, &h);
      t.hier.resize(static_cast<size_t>(all));
      hier_allgather(t, h, d.base(), d.bytes, t.hier.data(), "reduce_scatter");
      std::vector<const void*>& inputs = t.inputs;
      inputs.assign(static_cast<size_t>(t.nr), nullptr);
      for (int q = 0; q < t.nr; ++q) inputs[static_cast<size_t>(q)] = t.hier.data() + static_cast<uint64_t>(q) * d.bytes + my_off;
      reduce_arrays(d.dtype, op, out, inputs.data(), t.nr, row / dtype_size(d.dtype));
      return;
    }
    if (hier_chain_pays(t, TunedColl::ReduceScatter, d.bytes)) {
      // Larger, where the hosts hold runs of consecutive team ranks: folded along the hosts (hier.cpp).
      h.mode = kHierChainMode;
      hier_chain_reduce_scatter(t, h, op, d, out, "reduce_scatter");
      return;
    }
    if (t.algo(TunedColl::ReduceScatter, d.bytes) == CollAlgo::Bruck) {
      // Small: every member gathers every member's whole data (Bruck, log2 NR rounds) and reduces its
      // own row in team-rank order, as the pairwise algorithm does: the same bits. It moves NR times
      // the data of the pairwise exchange, so the size that counts is half of what a member gathers
      // (4 ranks, own tcp: 1 KiB data 171 vs 197 us pairwise, 4 KiB 259 vs 200 us).
      h.mode = 3;
      ensure_workspace(t, bruck_largest_message(t.nr, d.bytes), &h);
      bruck_allgather(t, h, d.base(), d.bytes, "reduce_scatter");
      std::vector<const void*>& inputs = t.inputs;
      inputs.assign(static_cast<size_t>(t.nr), nullptr);
      for (int q = 0; q < t.nr; ++q) inputs[static_cast<size_t>(q)] = gathered(t, q, d.bytes) + my_off;
      reduce_arrays(d.dtype, op, out, inputs.data(), t.nr, row / dtype_size(d.dtype));
      return;
    }
    const bool pull = pulls(t, row);
    if (pull) h.mode = kPullMode;
    ensure_workspace(t, row, &h);
    // Every member in shared memory: each reduces its row reading every member's data in place; a last
    // round so that no member changes its data while another may still read it.
    if (pull && pull_reduce(t, h, op, d.dtype, d, my_off, row, out, "reduce_scatter")) {
      (void)flag_round(t, h, 10, std::vector<uint64_t>(static_cast<size_t>(t.nr), 0), "reduce_scatter");
      return;
    }
    std::vector<uint64_t>& off = t.offsets;
    off.assign(static_cast<size_t>(t.nr) + 1, 0);
    for (int p = 0; p <= t.nr; ++p) off[static_cast<size_t>(p)] = static_cast<uint64_t>(p) * row;
    pairwise_reduce_scatter(t, h, op, d.dtype, d, off, out, false, "reduce_scatter");
  });
}

}  // namespace

void Team::reduce_scatter(const Window& data, ReduceOp op) {
  reduce_scatter_impl(team_call(s_, "reduce_scatter"), data, nullptr, op);
}

void Team::reduce_scatter(const Window& data, const Window& out, ReduceOp op) {
  reduce_scatter_impl(team_call(s_, "reduce_scatter"), data, &out, op);
}

void Team::allreduce(const Window& x, ReduceOp op, AllreduceMode mode) { allreduce(x, x, op, mode); }

// Mesh: every member sends its whole input to every other member and reduces all of them itself
// (one message latency). Bruck: the same, the inputs gathered in ceil(log2 NR) rounds of one
// message. Ring: pairwise reduce-scatter of NR blocks, then every member sends its
// reduced block to every other (2 (NR - 1) / NR of the data per member, like a ring, in two steps).
void Team::allreduce(const Window& src_w, const Window& dst_w, ReduceOp op, AllreduceMode mode) {
  TeamState& t = team_call(s_, "allreduce");
  Call call{t, "allreduce"};
  check_op(call, op);
  WindowState& src = call.window(src_w, "src");
  WindowState& dst = call.window(dst_w, "dst");
  call.same_dtype(src, "src", dst, "dst");
  if (Call::elements(src) != Call::elements(dst)) {
    throw Error(ErrorCode::ShapeMismatch, call.head() + ": src " + src.describe() + " and dst " + dst.describe() +
                                              " hold different numbers of elements");
  }
  const bool same = src.buf == dst.buf && src.offset == dst.offset;
  if (!same && Call::overlap(src, 0, src.bytes, dst, 0, dst.bytes)) {
    throw Error(ErrorCode::InvalidArgument, call.head() + ": src " + src.describe() + " and dst " + dst.describe() +
                                                " overlap without being the same view");
  }
  if (static_cast<uint8_t>(mode) > static_cast<uint8_t>(AllreduceMode::Bruck)) {
    throw Error(ErrorCode::InvalidArgument, call.head() + ": mode code " + std::to_string(static_cast<int>(mode)) +
                                                " is not an AllreduceMode");
  }
  AllreduceMode m = mode;
  if (m == AllreduceMode::Auto) m = t.cfg.force;
  static_assert(static_cast<int>(CollAlgo::Mesh) == static_cast<int>(AllreduceMode::Mesh) &&
                static_cast<int>(CollAlgo::Ring) == static_cast<int>(AllreduceMode::Ring) &&
                static_cast<int>(CollAlgo::Bruck) == static_cast<int>(AllreduceMode::Bruck));
  // Across hosts, small vectors gather through one leader per host (hier.cpp) unless a mode is forced.
  const bool hier = m == AllreduceMode::Auto && hier_pays(t, TunedColl::Allreduce, src.bytes);
  // Larger ones go along the hosts in a chain where the hosts hold runs of consecutive team ranks.
  const bool chain = m == AllreduceMode::Auto && !hier && hier_chain_pays(t, TunedColl::Allreduce, src.bytes);
  if (m == AllreduceMode::Auto) m = static_cast<AllreduceMode>(t.algo(TunedColl::Allreduce, src.bytes));
  call.run(CollKind::Allreduce, [&](MsgHeader& h) {
    h.dtype = static_cast<uint8_t>(src.dtype);
    h.count = Call::elements(src);
    h.op = static_cast<uint8_t>(op);
    h.mode = hier ? kHierMode : chain ? kHierChainMode : static_cast<uint8_t>(m);
    if (chain) h.root = hier_chain_lanes(t);
    if (t.nr == 1) {
      if (!same) std::memcpy(dst.base(), src.base(), src.bytes);
      return;
    }
    const size_t esz = dtype_size(src.dtype);
    if (hier) {
      // Every member gathers all NR inputs and reduces them in team-rank order: Mesh's and Bruck's bits.
      ensure_workspace(t, static_cast<uint64_t>(t.nr) * src.bytes, &h);
      t.hier.resize(static_cast<size_t>(t.nr) * src.bytes);
      hier_allgather(t, h, src.base(), src.bytes, t.hier.data(), "allreduce");
      std::vector<const void*>& inputs = t.inputs;
      inputs.assign(static_cast<size_t>(t.nr), nullptr);
      for (int q = 0; q < t.nr; ++q) inputs[static_cast<size_t>(q)] = t.hier.data() + static_cast<uint64_t>(q) * src.bytes;
      reduce_arrays(src.dtype, op, dst.base(), inputs.data(), t.nr, src.bytes / esz);
      return;
    }
    if (chain) {
      hier_chain_allreduce(t, h, op, src, dst, "allreduce");
      return;
    }
    if (m == AllreduceMode::Bruck) {
      // Every member gathers all NR inputs (log2 NR rounds) and reduces them itself in team-rank
      // order: the same bits as Mesh, on every member.
      ensure_workspace(t, bruck_largest_message(t.nr, src.bytes), &h);
      bruck_allgather(t, h, src.base(), src.bytes, "allreduce");
      std::vector<const void*>& inputs = t.inputs;
      inputs.assign(static_cast<size_t>(t.nr), nullptr);
      for (int q = 0; q < t.nr; ++q) inputs[static_cast<size_t>(q)] = gathered(t, q, src.bytes);
      reduce_arrays(src.dtype, op, dst.base(), inputs.data(), t.nr, src.bytes / esz);
      return;
    }
    const uint64_t cp_need = m == AllreduceMode::Mesh ? src.bytes : (src.bytes / static_cast<uint64_t>(t.nr) + esz);
    const bool pull = m == AllreduceMode::Ring && pulls(t, src.bytes / static_cast<uint64_t>(t.nr));
    if (pull) h.mode = kPullMode;
    ensure_workspace(t, cp_need, &h);
    const uint64_t cp = chunk_payload(t);
    if (m == AllreduceMode::Mesh) {
      ByteView sb(src);
      Exchange ex;
      ex.header = h;
      for (int p = 0; p < t.nr; ++p) {
        if (p == t.me) continue;
        ex.out.push_back(OutFlow{p, sb.ptr(), 0, src.bytes});
        ex.in.push_back(InFlow{p, src.bytes});
      }
      std::vector<const void*>& inputs = t.inputs;
      inputs.assign(static_cast<size_t>(t.nr), nullptr);
      auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
        if (lens[0] == 0) return;
        size_t i = 0;
        for (int q = 0; q < t.nr; ++q) inputs[static_cast<size_t>(q)] = q == t.me ? src.base() + j * cp : parts[i++];
        reduce_arrays(src.dtype, op, dst.base() + j * cp, inputs.data(), t.nr, lens[0] / esz);
      };
      ex.consume = consume;
      ex.final_acks = false;
      // In place the input is overwritten chunk by chunk: send each chunk (from a copy) before.
      ex.copy_sources = same;
      ex.send_before_consume = same;
      run_exchange(t, ex, "allreduce");
      return;
    }
    // Ring: blocks of whole elements, block b = elements [b n / NR, (b + 1) n / NR).
    const uint64_t n = static_cast<uint64_t>(Call::elements(src));
    std::vector<uint64_t>& off = t.offsets;
    off.assign(static_cast<size_t>(t.nr) + 1, 0);
    for (int b = 0; b <= t.nr; ++b) off[static_cast<size_t>(b)] = (static_cast<uint64_t>(b) * n / static_cast<uint64_t>(t.nr)) * esz;
    char* my_block = dst.base() + off[static_cast<size_t>(t.me)];
    // Every member in shared memory: each reduces its block reading every member's src in place, then
    // takes the other reduced blocks from their dst. In place is safe: a member overwrites its block q
    // (pulling it from q) only after q's offer of its reduced block, which q sends once it has read
    // every member's block q; and pull_blocks returns once every member has read what it pulled here.
    if (pull && pull_reduce(t, h, op, src.dtype, src, off[static_cast<size_t>(t.me)],
                            off[static_cast<size_t>(t.me) + 1] - off[static_cast<size_t>(t.me)], my_block, "allreduce")) {
      pull_blocks(t, h, dst, dst.base(),
                  [&off](int from, int) {
                    const auto f = static_cast<size_t>(from);
                    return Piece{off[f], off[f + 1] - off[f], off[f]};
                  },
                  "allreduce");
      return;
    }
    // Phase 1 writes only dst's own block and reads only the other blocks of src (or the own block
    // before it is written): in place is safe. Its sources are covered by phase 2: member b sends its
    // phase 2 messages only after it consumed everything we sent it in phase 1.
    pairwise_reduce_scatter(t, h, op, src.dtype, src, off, my_block, true, "allreduce");
    ByteView db(dst);
    Exchange ex;
    ex.header = h;
    ex.header.phase = 2;  // a message of the other phase never passes for this one
    const uint64_t mine = off[static_cast<size_t>(t.me) + 1] - off[static_cast<size_t>(t.me)];
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      ex.out.push_back(OutFlow{p, db.ptr(), off[static_cast<size_t>(t.me)], mine});
      ex.in.push_back(InFlow{p, off[static_cast<size_t>(p) + 1] - off[static_cast<size_t>(p)]});
    }
    auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      for (size_t i = 0; i < parts.size(); ++i) {
        if (lens[i]) std::memcpy(dst.base() + off[static_cast<size_t>(ex.in[i].peer)] + j * cp, parts[i], lens[i]);
      }
    };
    ex.consume = consume;
    ex.final_acks = false;
    run_exchange(t, ex, "allreduce");
  });
}

}  // namespace rwin

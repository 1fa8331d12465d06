// barrier, broadcast, allgather, all_to_all, all_to_all_v: the collectives that move data without
// reducing it.
#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>

#include "collectives/call.h"
#include "collectives/pull.h"

namespace rwin {

using namespace detail;

namespace {

// Rows of at least this many bytes are pushed (push_rows) on a team not all in shared memory: the
// offers cost one small round across hosts, which a row this large amortises (bench/RESULTS.md,
// "Large reductions along the hosts, rows pushed into the members' views": 32 KiB rows measured behind
// the messages).
constexpr uint64_t kPushMin = 64 * 1024;

// Every member writes its row for member p (`row` bytes at src_off(p) of `src`) straight into p's
// `dst`, at row me, where p's dst is this member's dst's copy (the symmetric-memory rule): a store
// into a mapped member's memory, else a put through the transport, then a message whose notify comes
// after the put, which is all p waits for. Rows to a member whose dst is not a copy go as messages
// (phase 76), and its rows here are taken from its messages. Phase 75: the offers (where each
// member's dst lies, as its key publishes it), so nothing is written into a member's dst before that
// member is in the call. The messages' acks (final_acks) come after the puts landed: src may change
// once this returns.
template <class SrcOff>
void push_rows(TeamState& t, const MsgHeader& h, const WindowState& src, SrcOff src_off, WindowState& dst, uint64_t row,
               const char* what) {
  const auto nr = static_cast<size_t>(t.nr);
  struct Offer {
    uint64_t base = 0, bytes = 0;
  };
  const Offer mine{dst.remote_base(t.c->rank), dst.bytes};
  std::vector<Offer> theirs(nr);
  {
    Exchange ex;
    ex.header = h;
    ex.header.phase = 75;
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      OutFlow f{p, nullptr, 0, sizeof(Offer)};
      f.raw = reinterpret_cast<const char*>(&mine);
      ex.out.push_back(f);
      ex.in.push_back(InFlow{p, sizeof(Offer)});
    }
    auto take = [&](uint64_t, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      for (size_t i = 0; i < parts.size(); ++i) {
        if (lens[i] == sizeof(Offer)) std::memcpy(&theirs[static_cast<size_t>(ex.in[i].peer)], parts[i], sizeof(Offer));
      }
    };
    ex.consume = take;
    ex.final_acks = false;
    run_exchange(t, ex, what);
  }
  auto copies = [&](int p) {
    const Offer& o = theirs[static_cast<size_t>(p)];
    return o.base == dst.remote_base(t.ranks[static_cast<size_t>(p)]) && o.bytes == dst.bytes;
  };
  ByteView sb(src), db(dst);
  const uint64_t at_me = static_cast<uint64_t>(t.me) * row;
  for (int p = 0; p < t.nr && row; ++p) {
    if (p == t.me || !copies(p)) continue;
    const int gp = t.ranks[static_cast<size_t>(p)];
    char* there = messages_stored(t, p) ? dst.mapped(gp) : nullptr;
    if (there) {
      std::memcpy(there + at_me, src.base() + src_off(p), row);
    } else {
      t.ctx->put_nbi(Slice{db.ptr(), {0, static_cast<int64_t>(at_me)}, {1, static_cast<int64_t>(row)}}, gp,
                     Slice{sb.ptr(), {0, static_cast<int64_t>(src_off(p))}, {1, static_cast<int64_t>(row)}});
    }
  }
  static const uint64_t kPushed = 1;
  Exchange ex;
  ex.header = h;
  ex.header.phase = 76;
  for (int p = 0; p < t.nr; ++p) {
    if (p == t.me) continue;
    if (copies(p)) {
      OutFlow f{p, nullptr, 0, 8};
      f.raw = reinterpret_cast<const char*>(&kPushed);
      ex.out.push_back(f);
      ex.in.push_back(InFlow{p, 8});
    } else {
      ex.out.push_back(OutFlow{p, sb.ptr(), src_off(p), row});
      ex.in.push_back(InFlow{p, row});
    }
  }
  const uint64_t cp = chunk_payload(t);
  auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
    for (size_t i = 0; i < parts.size(); ++i) {
      const int p = ex.in[i].peer;
      if (lens[i] && !copies(p)) std::memcpy(dst.base() + static_cast<uint64_t>(p) * row + j * cp, parts[i], lens[i]);
    }
  };
  ex.consume = consume;
  ex.final_acks = true;
  run_exchange(t, ex, what);
}

bool pushes(const TeamState& t, uint64_t row) { return !t.mapped && row >= kPushMin; }

}  // namespace

void Team::barrier() {
  TeamState& t = team_call(s_, "barrier");
  MsgHeader h = begin_call(t, CollKind::Barrier, "barrier");  // (not sent: compared with what others send)
  try {
    team_barrier(t, "barrier", &h);
  } catch (const Error& e) {
    fail_call(t, e.what());
    rethrow_in_call(e, t, "barrier");
  }
}

// Three algorithms (the tuning table picks): direct, the root puts to every member (2 members);
// tree, a binomial tree rooted at the root (up to one chunk on 3+ members: the root sends
// ceil(log2 NR) messages, not NR - 1); chain (more than one chunk), a pipelined chain root -> root+1
// -> ... in team-rank order. In a tree or chain each member forwards chunk j from its own x as soon
// as it landed, so every link carries the data once.
void Team::broadcast(const Window& xw, int root) {
  TeamState& t = team_call(s_, "broadcast");
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
    // Every member in shared memory: each reads the root's x (pull.h). From 16 x RWIN_COLL_PULL_MIN (128
    // KiB): below, the tree's one-message path beat two rounds of offers and flags on 4+ members
    // (bench/RESULTS.md, "Collectives by pull").
    if (pulls(t, x.bytes / 16)) {
      h.mode = kPullMode;
      ensure_workspace(t, std::min<uint64_t>(x.bytes, t.cfg.chunk_bytes), &h);
      pull_blocks(t, h, x, x.base(),
                  [&x, root](int from, int) { return Piece{0, from == root ? x.bytes : 0, 0}; }, "broadcast");
      return;
    }
    // Across hosts: a tree through the host leaders (hier.cpp), one message per other host across.
    const bool hier = hier_pays(t, TunedColl::Broadcast, x.bytes);
    const CollAlgo algo = hier ? CollAlgo::Tree : t.algo(TunedColl::Broadcast, x.bytes);
    if (hier) {
      h.mode = kHierMode;
    } else if (algo != CollAlgo::Direct) {
      h.mode = static_cast<uint8_t>(algo);
    }
    ensure_workspace(t, x.bytes, &h);
    const int pos = (t.me - root + t.nr) % t.nr;
    auto abs_rank = [&](int rel) { return (rel + root) % t.nr; };
    // Binomial: position pos hears from pos minus its highest bit and forwards to pos + 2^k for every
    // 2^k above pos's highest bit, farthest (largest subtree) first.
    const int high = pos > 0 ? static_cast<int>(std::bit_width(static_cast<unsigned>(pos))) - 1 : 0;
    int parent = -1;  // the member this one receives from (-1: the root)
    if (hier) {
      parent = hier_parent(t, root);
    } else if (pos > 0) {
      parent = algo == CollAlgo::Direct ? root : algo == CollAlgo::Tree ? abs_rank(pos - (1 << high)) : (t.me - 1 + t.nr) % t.nr;
    }
    // Calls fn(member) for each member this one sends to, in order, until fn returns false.
    auto each_child = [&](auto&& fn) {
      if (hier) {
        for (const int p : hier_children(t, root)) {
          if (!fn(p)) return;
        }
      } else if (algo == CollAlgo::Direct) {
        for (int p = 0; p < t.nr && pos == 0; ++p) {
          if (p != t.me && !fn(p)) return;
        }
      } else if (algo == CollAlgo::Tree) {
        // From the highest power of two below NR (k = ceil(log2 NR) - 1) down.
        for (int k = static_cast<int>(std::bit_width(static_cast<unsigned>(t.nr - 1))) - 1; k >= 0 && (pos == 0 || k > high); --k) {
          if (pos + (1 << k) < t.nr && !fn(abs_rank(pos + (1 << k)))) return;
        }
      } else if (pos < t.nr - 1) {
        fn((t.me + 1) % t.nr);
      }
    };
    // The exchange; its flows are the caller's. No wait for acks when the payload went through the
    // outbox (run_exchange waits when it went from x, a source the caller may change after we return).
    // The root then returns as soon as its messages are out, as a receiver does once its data landed:
    // a mismatch another member finds reaches it at its next call on the team (the abort word, or an
    // unconsumed message where its next one should be).
    auto exchange = [&](auto&& flows) {
      ByteView xb(x);
      Exchange ex;
      ex.header = h;
      ex.final_acks = false;
      flows(ex, xb);
      run_exchange(t, ex, "broadcast");
    };
    // Up to 64 bytes on a team all in shared memory: through the lines (channel.cpp), one per link.
    if (algo != CollAlgo::Chain && !hier && uses_lines(t, x.bytes)) {
      if (parent >= 0) recv_line(t, h, parent, x.base(), x.bytes, "broadcast");
      each_child([&](int p) {
        send_line(t, h, p, x.base(), x.bytes, "broadcast");
        return true;
      });
      return;
    }
    // One message per link (Direct, Tree): the latency path first, receive (recv_one) then forward
    // (send_one); an exchange carries what it could not (a member not mapped here or without a free
    // slot, and every member after it).
    if (algo != CollAlgo::Chain && (parent < 0 || recv_one(t, h, parent, x.base(), x.bytes, "broadcast"))) {
      int sent = 0;
      bool stuck = false;
      each_child([&](int p) {
        stuck = !send_one(t, h, p, x.base(), x.bytes);
        sent += stuck ? 0 : 1;
        return !stuck;
      });
      if (stuck) {
        exchange([&](Exchange& ex, const ByteView& xb) {
          int i = 0;
          each_child([&](int p) {
            if (i++ >= sent) ex.out.push_back(OutFlow{p, xb.ptr(), 0, x.bytes});
            return true;
          });
        });
      }
      return;
    }
    // More than one message: chunk j is forwarded from x as soon as it landed there.
    uint64_t ready = 0;
    const uint64_t cp = chunk_payload(t);
    auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      if (lens[0]) std::memcpy(x.base() + j * cp, parts[0], lens[0]);
      ready = j + 1;
    };
    exchange([&](Exchange& ex, const ByteView& xb) {
      if (parent >= 0) ex.in.push_back(InFlow{parent, x.bytes});
      each_child([&](int p) {
        OutFlow f{p, xb.ptr(), 0, x.bytes};
        if (parent >= 0) f.ready = &ready;
        ex.out.push_back(f);
        return true;
      });
      ex.consume = consume;
    });
  });
}

// Every member puts its stage into every other member's scratch (the same bytes on the wire per
// member as a ring, NR - 1 peers at once, one step), each copies the rows into `data`. Rows of at
// most RWIN_COLL_BRUCK_MAX bytes on 3+ members not all mapped here (TeamState::mapped) go by Bruck
// (ceil(log2 NR) rounds of one message).
void Team::allgather(const Window& stage_w, const Window& data_w) {
  TeamState& t = team_call(s_, "allgather");
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
    if (hier_pays(t, TunedColl::Allgather, row)) {  // across hosts: through one leader per host (hier.cpp), straight into data
      h.mode = kHierMode;
      ensure_workspace(t, static_cast<uint64_t>(t.nr) * row, &h);
      hier_allgather(t, h, st.base(), row, d.base(), "allgather");
      return;
    }
    if (t.algo(TunedColl::Allgather, row) == CollAlgo::Bruck) {
      h.mode = 3;  // members that disagree on the algorithm (their tuning tables) mismatch
      ensure_workspace(t, bruck_largest_message(t.nr, row), &h);
      bruck_allgather(t, h, st.base(), row, "allgather");
      for (int q = 0; q < t.nr && row; ++q) {
        if (q != t.me) std::memcpy(d.base() + static_cast<uint64_t>(q) * row, gathered(t, q, row), row);
      }
      return;
    }
    if (pulls(t, row)) {  // every member in shared memory: each reads the others' stage (pull.h)
      h.mode = kPullMode;
      ensure_workspace(t, row, &h);
      pull_blocks(t, h, st, d.base(), [row](int from, int) { return Piece{0, row, static_cast<uint64_t>(from) * row}; },
                  "allgather");
      return;
    }
    if (pushes(t, row)) {  // some member through a transport: each writes its stage into the others' data
      h.mode = kPushMode;
      ensure_workspace(t, row, &h);  // slots for the rows of a member whose data is not a copy
      push_rows(t, h, st, [](int) { return uint64_t{0}; }, d, row, "allgather");
      return;
    }
    ensure_workspace(t, row, &h);
    ByteView sb(st);
    Exchange ex;
    ex.header = h;
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      ex.out.push_back(OutFlow{p, sb.ptr(), 0, row});
      ex.in.push_back(InFlow{p, row});
    }
    const uint64_t cp = chunk_payload(t);
    auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      for (size_t i = 0; i < parts.size(); ++i) {
        if (lens[i]) std::memcpy(d.base() + static_cast<uint64_t>(ex.in[i].peer) * row + j * cp, parts[i], lens[i]);
      }
    };
    ex.consume = consume;
    ex.final_acks = false;  // every pair checks the other's header; sources: see run_exchange
    run_exchange(t, ex, "allgather");
  });
}

// Pairwise: member r puts stage row p to member p, and copies what member q sent into data row q.
// A stage of at most RWIN_COLL_BRUCK_MAX bytes on 3+ members not all mapped here goes by Bruck.
void Team::all_to_all(const Window& stage_w, const Window& data_w) {
  TeamState& t = team_call(s_, "all_to_all");
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
    if (hier_pays(t, TunedColl::AllToAll, st.bytes)) {  // across hosts: through one leader per host (hier.cpp)
      h.mode = kHierMode;
      ensure_workspace(t, st.bytes, &h);
      hier_all_to_all(t, h, st.base(), d.base(), row, "all_to_all");
      return;
    }
    if (t.algo(TunedColl::AllToAll, st.bytes) == CollAlgo::Bruck) {
      h.mode = 3;
      ensure_workspace(t, static_cast<uint64_t>(t.nr / 2 + 1) * row, &h);  // a round moves at most NR / 2 + 1 blocks
      bruck_all_to_all(t, h, st.base(), d.base(), row, "all_to_all");
      return;
    }
    if (pulls(t, row)) {  // every member in shared memory: each reads its block of the others' stage
      h.mode = kPullMode;
      ensure_workspace(t, row, &h);
      pull_blocks(t, h, st, d.base(),
                  [row](int from, int to) { return Piece{static_cast<uint64_t>(to) * row, row, static_cast<uint64_t>(from) * row}; },
                  "all_to_all");
      return;
    }
    if (pushes(t, row)) {  // some member through a transport: each writes its blocks into the others' data
      h.mode = kPushMode;
      ensure_workspace(t, row, &h);
      push_rows(t, h, st, [row](int p) { return static_cast<uint64_t>(p) * row; }, d, row, "all_to_all");
      return;
    }
    ensure_workspace(t, row, &h);
    ByteView sb(st);
    Exchange ex;
    ex.header = h;
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      ex.out.push_back(OutFlow{p, sb.ptr(), static_cast<uint64_t>(p) * row, row});
      ex.in.push_back(InFlow{p, row});
    }
    const uint64_t cp = chunk_payload(t);
    auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      for (size_t i = 0; i < parts.size(); ++i) {
        if (lens[i]) std::memcpy(d.base() + static_cast<uint64_t>(ex.in[i].peer) * row + j * cp, parts[i], lens[i]);
      }
    };
    ex.consume = consume;
    ex.final_acks = false;
    run_exchange(t, ex, "all_to_all");
  });
}


namespace {

// all_to_all_v's per-member vectors, checked before any message: one entry per member, counts and
// offsets >= 0, every block inside its view (overflow-free), the recv blocks disjoint.
void check_blocks(const Call& call, const char* view, const WindowState& w, const char* counts_name,
                  const std::vector<int64_t>& counts, const char* offsets_name, const std::vector<int64_t>& offsets,
                  bool disjoint) {
  const auto nr = static_cast<size_t>(call.t.nr);
  for (const auto& [name, v] : {std::pair{counts_name, &counts}, std::pair{offsets_name, &offsets}}) {
    if (v->size() != nr) {
      throw Error(ErrorCode::InvalidArgument, call.head() + ": " + name + " has " + std::to_string(v->size()) +
                                                  " entries, expected one per member (" + std::to_string(nr) + ")");
    }
  }
  const int64_t n = Call::elements(w);
  for (size_t q = 0; q < nr; ++q) {
    const int64_t c = counts[q], o = offsets[q];
    if (c < 0 || o < 0 || o > n || c > n - o) {
      throw Error(ErrorCode::InvalidArgument, call.head() + ": " + counts_name + "[" + std::to_string(q) + "] = " +
                                                  std::to_string(c) + " at " + offsets_name + "[" + std::to_string(q) +
                                                  "] = " + std::to_string(o) + " is outside " + view + " " + w.describe() +
                                                  " (" + std::to_string(n) + " elements)");
    }
  }
  if (!disjoint) return;
  std::vector<size_t> order(nr);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
  size_t prev = nr;  // the last non-empty block in offset order
  for (size_t q : order) {
    if (counts[q] == 0) continue;
    if (prev != nr && offsets[prev] + counts[prev] > offsets[q]) {
      throw Error(ErrorCode::InvalidArgument, call.head() + ": " + view + " blocks of members " + std::to_string(prev) +
                                                  " and " + std::to_string(q) + " overlap (" + offsets_name + " " +
                                                  std::to_string(offsets[prev]) + " + " + std::to_string(counts[prev]) +
                                                  " > " + std::to_string(offsets[q]) + ")");
    }
    prev = q;
  }
}

std::vector<int64_t> packed(const std::vector<int64_t>& counts) {
  std::vector<int64_t> off(counts.size());
  int64_t at = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    off[q] = at;
    // A negative count is refused by check_blocks; a sum past int64 leaves the view anyway.
    at = counts[q] > 0 && at > INT64_MAX - counts[q] ? INT64_MAX : at + std::max<int64_t>(counts[q], 0);
  }
  return off;
}

}  // namespace

void Team::all_to_all_v(const Window& send_w, const std::vector<int64_t>& send_counts,
                        const std::vector<int64_t>& send_offsets, const Window& recv_w,
                        const std::vector<int64_t>& recv_counts, const std::vector<int64_t>& recv_offsets) {
  TeamState& t = team_call(s_, "all_to_all_v");
  Call call{t, "all_to_all_v"};
  WindowState& s = call.window(send_w, "send");
  WindowState& d = call.window(recv_w, "recv");
  call.same_dtype(s, "send", d, "recv");
  check_blocks(call, "send", s, "send_counts", send_counts, "send_offsets", send_offsets, false);
  check_blocks(call, "recv", d, "recv_counts", recv_counts, "recv_offsets", recv_offsets, true);
  if (Call::overlap(s, 0, s.bytes, d, 0, d.bytes)) {
    throw Error(ErrorCode::InvalidArgument, call.head() + ": send " + s.describe() + " and recv " + d.describe() +
                                                " overlap (all_to_all_v is not in place)");
  }
  const auto me = static_cast<size_t>(t.me);
  if (send_counts[me] != recv_counts[me]) {
    throw Error(ErrorCode::InvalidArgument, call.head() + ": this member sends itself send_counts[" + std::to_string(me) +
                                                "] = " + std::to_string(send_counts[me]) + " elements but expects recv_counts[" +
                                                std::to_string(me) + "] = " + std::to_string(recv_counts[me]));
  }
  const auto esz = static_cast<uint64_t>(dtype_size(s.dtype));
  const auto bytes = [esz](int64_t elements) { return static_cast<uint64_t>(elements) * esz; };
  // Every member in shared memory: the pairs whose block is large read it in place (pull.h); a pair
  // decides by its own count, which both ends hold, so the call's mode depends on the knob alone.
  const bool pull = t.nr > 1 && pulls(t, t.cfg.pull_min);
  call.run(CollKind::AllToAllV, [&](MsgHeader& h) {
    h.dtype = static_cast<uint8_t>(s.dtype);
    h.count = 0;  // per flow: each message carries its flow's bytes (MsgHeader::total), checked by the receiver
    if (pull) h.mode = kPullMode;
    if (send_counts[me]) std::memcpy(d.base() + bytes(recv_offsets[me]), s.base() + bytes(send_offsets[me]), bytes(send_counts[me]));
    if (t.nr == 1) return;
    ensure_workspace(t, t.cfg.chunk_bytes, &h);
    if (pull) {
      TeamState::PairArrays& a = t.pa;
      a.to.resize(static_cast<size_t>(t.nr));
      a.from.resize(static_cast<size_t>(t.nr));
      for (size_t q = 0; q < a.to.size(); ++q) {
        a.to[q] = Block{bytes(send_offsets[q]), bytes(send_counts[q])};
        a.from[q] = Block{bytes(recv_offsets[q]), bytes(recv_counts[q])};
      }
      pull_pairs(t, h, s, d.base(), "all_to_all_v");
      return;
    }
    ByteView sb(s);
    Exchange ex;
    ex.header = h;
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      const auto q = static_cast<size_t>(p);
      ex.out.push_back(OutFlow{p, sb.ptr(), bytes(send_offsets[q]), bytes(send_counts[q])});
      ex.in.push_back(InFlow{p, bytes(recv_counts[q])});
    }
    const uint64_t cp = chunk_payload(t);
    auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
      for (size_t i = 0; i < parts.size(); ++i) {
        if (lens[i]) std::memcpy(d.base() + bytes(recv_offsets[static_cast<size_t>(ex.in[i].peer)]) + j * cp, parts[i], lens[i]);
      }
    };
    ex.consume = consume;
    ex.final_acks = false;
    run_exchange(t, ex, "all_to_all_v");
  });
}

void Team::all_to_all_v(const Window& send, const std::vector<int64_t>& send_counts, const Window& recv,
                        const std::vector<int64_t>& recv_counts) {
  all_to_all_v(send, send_counts, packed(send_counts), recv, recv_counts, packed(recv_counts));
}

// ---------------------------------------------------------------------------------------------
// Over the whole job

void barrier_collective(Context& ctx) { world(ctx).barrier(); }
void broadcast(Context& ctx, const Window& x, int root) { world(ctx).broadcast(x, root); }
void allgather(Context& ctx, const Window& stage, const Window& data) { world(ctx).allgather(stage, data); }
void reduce_scatter(Context& ctx, const Window& data, ReduceOp op) { world(ctx).reduce_scatter(data, op); }
void allreduce(Context& ctx, const Window& x, ReduceOp op, AllreduceMode mode) { world(ctx).allreduce(x, op, mode); }
void all_to_all(Context& ctx, const Window& stage, const Window& data) { world(ctx).all_to_all(stage, data); }
void all_to_all_v(Context& ctx, const Window& send, const std::vector<int64_t>& send_counts,
                  const std::vector<int64_t>& send_offsets, const Window& recv, const std::vector<int64_t>& recv_counts,
                  const std::vector<int64_t>& recv_offsets) {
  world(ctx).all_to_all_v(send, send_counts, send_offsets, recv, recv_counts, recv_offsets);
}

}  // namespace rwin

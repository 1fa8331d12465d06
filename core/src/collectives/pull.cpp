// Collectives by pull (docs/CONTRACT.md, "Collectives"): on a team whose every member's memory is
// mapped here (shared memory), members read each other's windows directly instead of copying every
// byte into a scratch slot and out of it. Small messages through the ordinary engine (run_exchange)
// carry only addresses and flags: an offer says where a member's view lies and that it is ready, a
// flag says a member is done. A member reads from p only where p's view is exactly its own view's copy
// in p's memory (the same buffer at the same offset: the symmetric-memory rule); what it cannot pull
// travels as ordinary messages.
#include "collectives/pull.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace rwin::detail {

bool pulls(const TeamState& t, uint64_t block) { return t.mapped && t.cfg.pull_min != 0 && block >= t.cfg.pull_min; }

namespace {

bool everyone(int) { return true; }

// One message of `bytes` to every other member p with to(p) (header phase `phase`), its payload at
// payload(p); take(q, payload) for each one received, from every member q with from(q).
template <class Payload, class Take, class To = bool (*)(int), class From = bool (*)(int)>
void small_round(TeamState& t, const MsgHeader& h, uint8_t phase, uint64_t bytes, Payload&& payload, Take&& take,
                 const char* what, To&& to = everyone, From&& from = everyone) {
  Exchange ex;
  ex.header = h;
  ex.header.phase = phase;
  for (int p = 0; p < t.nr; ++p) {
    if (p == t.me) continue;
    if (to(p)) {
      OutFlow f{p, nullptr, 0, bytes};
      f.raw = static_cast<const char*>(payload(p));
      ex.out.push_back(f);
    }
    if (from(p)) ex.in.push_back(InFlow{p, bytes});
  }
  if (ex.out.empty() && ex.in.empty()) return;
  auto consume = [&](uint64_t, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i] && lens[i] == bytes) take(static_cast<size_t>(ex.in[i].peer), parts[i]);
    }
  };
  ex.consume = consume;
  ex.final_acks = false;
  run_exchange(t, ex, what);
}

// The last phase of a pull (5): what could not be read in place travels as ordinary messages.
// send(p): the block of `view` this member sends p, if any; take(p): the block of `out` that p's
// message fills, if any.
template <class Send, class Take>
void send_the_rest(TeamState& t, const MsgHeader& h, const WindowState& view, char* out, Send&& send, Take&& take,
                   const char* what) {
  Exchange ex;
  ex.header = h;
  ex.header.phase = 5;
  ByteView vb(view);
  for (int p = 0; p < t.nr; ++p) {
    if (p == t.me) continue;
    if (const std::optional<Block> b = send(p)) ex.out.push_back(OutFlow{p, vb.ptr(), b->off, b->len});
    if (const std::optional<Block> b = take(p)) ex.in.push_back(InFlow{p, b->len});
  }
  if (ex.out.empty() && ex.in.empty()) return;
  const uint64_t cp = chunk_payload(t);
  auto consume = [&](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (lens[i]) std::memcpy(out + take(ex.in[i].peer)->off + j * cp, parts[i], lens[i]);
    }
  };
  ex.consume = consume;
  ex.final_acks = false;
  run_exchange(t, ex, what);
}

}  // namespace

std::vector<uint64_t> flag_round(TeamState& t, const MsgHeader& h, uint8_t phase, const std::vector<uint64_t>& to_each,
                                 const char* what) {
  std::vector<uint64_t> from(static_cast<size_t>(t.nr), 0);
  small_round(
      t, h, phase, 8, [&](int p) -> const void* { return &to_each[static_cast<size_t>(p)]; },
      [&](size_t q, const char* b) { std::memcpy(&from[q], b, 8); }, what);
  return from;
}

std::vector<const char*> offer_round(TeamState& t, const MsgHeader& h, uint8_t phase, const WindowState& view,
                                     const char* what) {
  struct Offer {
    uint64_t base = 0;  // where the view starts, as its owner's own key publishes it
    uint64_t bytes = 0;
  };
  const Offer mine{view.remote_base(t.c->rank), view.bytes};
  std::vector<Offer> theirs(static_cast<size_t>(t.nr));
  small_round(
      t, h, phase, sizeof(Offer), [&](int) -> const void* { return &mine; },
      [&](size_t q, const char* b) { std::memcpy(&theirs[q], b, sizeof(Offer)); }, what);
  std::vector<const char*> at(static_cast<size_t>(t.nr), nullptr);
  for (int p = 0; p < t.nr; ++p) {
    if (p == t.me) continue;
    const auto q = static_cast<size_t>(p);
    const int gp = t.ranks[q];
    const char* src = view.mapped(gp);
    if (src && theirs[q].base == view.remote_base(gp) && theirs[q].bytes == view.bytes) at[q] = src;
  }
  return at;
}

void pull_blocks(TeamState& t, const MsgHeader& h, const WindowState& view, char* out, const PieceOf& piece,
                 const char* what) {
  const auto nr = static_cast<size_t>(t.nr);
  const std::vector<const char*> at = offer_round(t, h, 3, view, what);
  std::vector<uint64_t> pulled(nr, 0);
  for (int p = 0; p < t.nr; ++p) {
    const auto q = static_cast<size_t>(p);
    if (p == t.me || !at[q]) continue;
    const Piece pc = piece(p, t.me);
    if (pc.len) std::memcpy(out + pc.dst_off, at[q] + pc.src_off, pc.len);
    pulled[q] = 1;
  }
  // After this round every member has read what it pulled from this one (its view may change then).
  const std::vector<uint64_t> their_pulled = flag_round(t, h, 4, pulled, what);
  // What a member could not pull (its view is not this one's copy): ordinary messages.
  send_the_rest(
      t, h, view, out,
      [&](int p) -> std::optional<Block> {
        if (their_pulled[static_cast<size_t>(p)]) return std::nullopt;
        const Piece pc = piece(t.me, p);
        return Block{pc.src_off, pc.len};
      },
      [&](int p) -> std::optional<Block> {
        if (pulled[static_cast<size_t>(p)]) return std::nullopt;
        const Piece pc = piece(p, t.me);
        return Block{pc.dst_off, pc.len};
      },
      what);
}

void pull_pairs(TeamState& t, const MsgHeader& h, const WindowState& send, char* out, const char* what) {
  const auto nr = static_cast<size_t>(t.nr);
  const uint64_t min = t.cfg.pull_min;
  TeamState::PairArrays& a = t.pa;
  const std::vector<Block>& to = a.to;
  const std::vector<Block>& from = a.from;
  auto big_to = [&](int p) { return to[static_cast<size_t>(p)].len >= min; };
  auto big_from = [&](int p) { return from[static_cast<size_t>(p)].len >= min; };
  a.pulled.assign(nr, 0);
  a.their_pulled.assign(nr, 0);
  bool any = false;  // a large block to or from this member: else no offers, no flags, only messages
  for (int p = 0; p < t.nr; ++p) any = any || (p != t.me && (big_to(p) || big_from(p)));
  if (any) {
    // Offers, to the members that take a large block from this one: where the send view lies (as
    // its owner's key publishes it), its size, and which block of it is theirs.
    enum { kBase, kBytes, kOff, kLen };
    a.mine.resize(nr);
    a.theirs.resize(nr);
    for (size_t q = 0; q < nr; ++q) a.mine[q] = {send.remote_base(t.c->rank), send.bytes, to[q].off, to[q].len};
    small_round(
        t, h, 3, sizeof a.mine[0], [&](int p) -> const void* { return a.mine[static_cast<size_t>(p)].data(); },
        [&](size_t q, const char* b) { std::memcpy(a.theirs[q].data(), b, sizeof a.theirs[q]); }, what, big_to, big_from);
    for (int p = 0; p < t.nr; ++p) {
      const auto q = static_cast<size_t>(p);
      if (p == t.me || !big_from(p)) continue;
      const std::array<uint64_t, 4>& o = a.theirs[q];
      if (o[kLen] != from[q].len) {
        const uint64_t esz = std::max<uint64_t>(1, dtype_size(static_cast<DType>(h.dtype)));
        const auto els = [esz](uint64_t b) { return std::to_string(b / esz) + " elements (" + std::to_string(b) + " bytes)"; };
        report_mismatch(t, p, h, h, what,
                        peer_name(t, p) + " sends " + els(o[kLen]) + " to " + peer_name(t, t.me) + ", which expects " +
                            els(from[q].len) + " from it");
      }
      const char* src = send.mapped(t.ranks[q]);
      // Its block must lie inside its view, which must be this one's copy (same buffer, same offset, same size).
      if (src && o[kBase] == send.remote_base(t.ranks[q]) && o[kBytes] == send.bytes && o[kOff] <= o[kBytes] &&
          o[kLen] <= o[kBytes] - o[kOff]) {
        std::memcpy(out + from[q].off, src + o[kOff], o[kLen]);
        a.pulled[q] = 1;
      }
    }
    // Every member that takes a large block from this one says whether it read it in place; after
    // this round none reads this one's send view any more.
    small_round(
        t, h, 4, 8, [&](int p) -> const void* { return &a.pulled[static_cast<size_t>(p)]; },
        [&](size_t q, const char* b) { std::memcpy(&a.their_pulled[q], b, 8); }, what, big_from, big_to);
  }
  // The small blocks, and the large ones that could not be read in place: ordinary messages.
  send_the_rest(
      t, h, send, out,
      [&](int p) -> std::optional<Block> {
        if (big_to(p) && a.their_pulled[static_cast<size_t>(p)]) return std::nullopt;
        return to[static_cast<size_t>(p)];
      },
      [&](int p) -> std::optional<Block> {
        if (big_from(p) && a.pulled[static_cast<size_t>(p)]) return std::nullopt;
        return from[static_cast<size_t>(p)];
      },
      what);
}

bool pull_reduce(TeamState& t, const MsgHeader& h, ReduceOp op, DType dtype, const WindowState& src, uint64_t off,
                 uint64_t len, char* out, const char* what) {
  const std::vector<const char*> at = offer_round(t, h, 8, src, what);
  uint64_t ok = 1;
  for (int p = 0; p < t.nr; ++p) ok = ok && (p == t.me || at[static_cast<size_t>(p)]);
  // All or nothing: a reduction needs every member's input, so one view that is not another's copy
  // sends the whole call to the message path, on every member (each sees every member's verdict).
  const std::vector<uint64_t> oks = flag_round(t, h, 9, std::vector<uint64_t>(static_cast<size_t>(t.nr), ok), what);
  for (int p = 0; p < t.nr; ++p) ok = ok && (p == t.me || oks[static_cast<size_t>(p)]);
  if (!ok) return false;
  std::vector<const void*>& inputs = t.inputs;
  inputs.assign(static_cast<size_t>(t.nr), nullptr);
  for (int q = 0; q < t.nr; ++q) inputs[static_cast<size_t>(q)] = (q == t.me ? src.base() : at[static_cast<size_t>(q)]) + off;
  // In team-rank order, like every other path: the same bits.
  if (len) reduce_arrays(dtype, op, out, inputs.data(), t.nr, len / dtype_size(dtype));
  return true;
}

}  // namespace rwin::detail

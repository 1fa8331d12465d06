// Collectives by pull on a team all in shared memory (pull.cpp; docs/CONTRACT.md, "Collectives").
// Header phases: 3 offers, 4 pulled flags, 5 blocks not pulled (pull_blocks, pull_pairs); 8 offers, 9 verdicts
// (pull_reduce); 10 "done reading" (reduce_scatter). Every call that pulls carries mode 6.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "collectives/team_state.h"

namespace rwin::detail {

constexpr uint8_t kPullMode = 6;

// Whether a call with blocks of `block` bytes pulls: every member mapped here, RWIN_COLL_PULL_MIN.
bool pulls(const TeamState& t, uint64_t block);

// One 8-byte message to every other member: to_each[p] to member p; returns what each sent here.
std::vector<uint64_t> flag_round(TeamState& t, const MsgHeader& h, uint8_t phase, const std::vector<uint64_t>& to_each,
                                 const char* what);

// Tells every other member where `view` lies (and that it is ready); returns, per member, where its
// copy of `view` can be read here: null where its view is not this one's copy (or not mapped).
std::vector<const char*> offer_round(TeamState& t, const MsgHeader& h, uint8_t phase, const WindowState& view,
                                     const char* what);

// What member `receiver` takes from member `sender`: `len` bytes at `src_off` of the sender's view,
// stored at `dst_off` of the receiver's output.
struct Piece {
  uint64_t src_off = 0, len = 0, dst_off = 0;
};
using PieceOf = std::function<Piece(int sender, int receiver)>;

// Every member takes piece(p, me) from every other member p's `view` into `out`: pulled where p's view
// is this one's copy, else sent by p as messages. Returns once every member has read what it pulled
// from this one.
void pull_blocks(TeamState& t, const MsgHeader& h, const WindowState& view, char* out, const PieceOf& piece,
                 const char* what);

// all_to_all_v by pull. Its members know their own counts only, so each pair decides alone, by the
// count both of its ends hold (and check against each other): a block of at least RWIN_COLL_PULL_MIN
// bytes is read in place by its receiver, where the sender's send view is this one's copy; the other
// blocks travel as messages (header phases 3, 4, 5 as pull_blocks). to[p]: the bytes this member
// sends member p, at that offset of `send`; from[p]: the bytes it takes from p, at that offset of
// `out` (the caller fills t.pa.to and t.pa.from). Returns once every member has read what it pulled
// from this one.
void pull_pairs(TeamState& t, const MsgHeader& h, const WindowState& send, char* out, const char* what);

// Reduces bytes [off, off + len) of every member's `src` (read in place, team-rank order) into `out`.
// False, on every member alike and with nothing done, when some member's src is not another's copy.
// The caller makes sure no member changes its src while another may still read it.
bool pull_reduce(TeamState& t, const MsgHeader& h, ReduceOp op, DType dtype, const WindowState& src, uint64_t off,
                 uint64_t len, char* out, const char* what);

}  // namespace rwin::detail

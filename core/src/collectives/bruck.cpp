// Bruck's algorithms for small messages over the message layer (channel.cpp): ceil(log2 NR) rounds of
// one message each, for allgather and all_to_all on teams not all in shared memory.
#include <algorithm>
#include <cstring>

#include "collectives/team_state.h"

namespace rwin::detail {

// ---------------------------------------------------------------------------------------------
// Bruck's allgather (small messages: one message per round instead of NR - 1 at once; what a
// member waits for per message, a scheduler hand-off when ranks outnumber cores, dominates there)

uint64_t bruck_largest_message(int nr, uint64_t row) {
  uint64_t most = 0;
  for (int d = 1; d < nr; d *= 2) most = std::max<uint64_t>(most, static_cast<uint64_t>(std::min(d, nr - d)));
  return most * row;
}

namespace {

// One round of Bruck's algorithms: `bytes` of plain memory at `out` to team rank `to`, as many from
// `from` into `in`, as an exchange of this call with phase 16 + round (staged: nothing of the caller's
// is read after it, so nobody waits for acks).
void bruck_round(TeamState& t, const MsgHeader& h, int round, int to, const char* out, int from, char* in,
                 uint64_t bytes, const char* what) {
  Exchange ex;
  ex.header = h;
  ex.header.phase = static_cast<uint8_t>(16 + round);
  OutFlow o{to, nullptr, 0, bytes};
  o.raw = out;
  ex.out.push_back(o);
  ex.in.push_back(InFlow{from, bytes});
  const uint64_t cp = chunk_payload(t);
  auto consume = [in, cp](uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens) {
    if (lens[0]) std::memcpy(in + j * cp, parts[0], lens[0]);
  };
  ex.consume = consume;
  ex.final_acks = false;
  run_exchange(t, ex, what);
}

}  // namespace

void bruck_allgather(TeamState& t, const MsgHeader& h, const char* mine, uint64_t row, const char* what) {
  t.gather.resize(static_cast<size_t>(static_cast<uint64_t>(t.nr) * row));
  char* g = t.gather.data();
  if (row) std::memcpy(g, mine, row);
  int round = 0;
  for (int d = 1; d < t.nr; d *= 2, ++round) {
    const uint64_t bytes = static_cast<uint64_t>(std::min(d, t.nr - d)) * row;
    bruck_round(t, h, round, (t.me - d + t.nr) % t.nr, g, (t.me + d) % t.nr, g + static_cast<uint64_t>(d) * row, bytes, what);
  }
}

const char* gathered(const TeamState& t, int q, uint64_t row) {
  return t.gather.data() + static_cast<uint64_t>((q - t.me + t.nr) % t.nr) * row;
}

void bruck_all_to_all(TeamState& t, const MsgHeader& h, const char* stage, char* data, uint64_t block, const char* what) {
  const auto nr = static_cast<uint64_t>(t.nr);
  // Rotated: index i holds the block for team rank me + i. A block moves by 2^k in every round k whose
  // bit its index has, so the block at index i ends at me + i, which is its destination.
  t.gather.resize(static_cast<size_t>(nr * block));
  char* g = t.gather.data();
  for (uint64_t i = 0; i < nr && block; ++i) std::memcpy(g + i * block, stage + ((static_cast<uint64_t>(t.me) + i) % nr) * block, block);
  int round = 0;
  for (int d = 1; d < t.nr; d *= 2, ++round) {
    uint64_t n = 0;
    for (int i = 0; i < t.nr; ++i) n += (i & d) ? 1 : 0;
    t.pack_out.resize(static_cast<size_t>(n * block));
    t.pack_in.resize(static_cast<size_t>(n * block));
    uint64_t at = 0;
    for (int i = 0; i < t.nr && block; ++i) {
      if (i & d) std::memcpy(t.pack_out.data() + (at++) * block, g + static_cast<uint64_t>(i) * block, block);
    }
    bruck_round(t, h, round, (t.me + d) % t.nr, t.pack_out.data(), (t.me - d + t.nr) % t.nr, t.pack_in.data(), n * block, what);
    at = 0;
    for (int i = 0; i < t.nr && block; ++i) {
      if (i & d) std::memcpy(g + static_cast<uint64_t>(i) * block, t.pack_in.data() + (at++) * block, block);
    }
  }
  // Index i came from team rank me - i.
  for (uint64_t i = 0; i < nr && block; ++i) {
    std::memcpy(data + ((static_cast<uint64_t>(t.me) + nr - i) % nr) * block, g + i * block, block);
  }
}

}  // namespace rwin::detail

// The team workspace: the scratch slots messages land in, the outbox they leave from and the signal
// words that count them (channel.cpp describes the protocol), grown collectively when a call needs
// larger slots.
#include <algorithm>
#include <cstring>

#include "collectives/team_state.h"
#include "ops.h"

namespace rwin::detail {

namespace {

// Maps our slots in every mapped member's new scratch now, at growth, instead of one page fault per
// slot in the first calls that use each slot (a 64-deep window of 4 KiB slots made the first ~64 4 KiB
// allreduces on shared memory 3x slower on average). Reads only, and only of our own slots there, which
// only we write. Our own scratch and outbox need nothing: every transport zeroes (so faults in) a
// region before its key leaves this rank; touching our scratch here raced with a faster member's
// messages already landing in it (own tcp's receiver thread, TSan).
void prefault(TeamState& t) {
  constexpr uint64_t kPage = 4096;
  auto touch = [](const char* p, uint64_t n) {
    for (uint64_t i = 0; i < n; i += kPage) (void)*reinterpret_cast<const volatile char*>(p + i);
  };
  const uint64_t mine = t.slots * t.slot_bytes;
  for (int p = 0; p < t.nr; ++p) {
    if (p == t.me) continue;
    if (const char* m = t.scratch->mapped(t.ranks[static_cast<size_t>(p)])) touch(m + static_cast<uint64_t>(t.me) * mine, mine);
  }
}
// A U8 [1, bytes] view of the whole of `buf`.
std::shared_ptr<WindowState> u8_view(std::shared_ptr<BufferState> buf, uint64_t bytes) {
  auto v = std::make_shared<WindowState>();
  v->buf = std::move(buf);
  v->dtype = DType::U8;
  v->shape = {1, static_cast<int64_t>(bytes)};
  v->bytes = bytes;
  return v;
}

// The lines (channel.cpp, "Lines"), with the signals at the team's first call, on a team all in shared
// memory. Their size names RWIN_COLL_LINES (64 bytes more, so 0 has a size too): a member whose count
// differs fails the registration's size check (WindowMismatch) instead of writing past the region.
void make_lines(TeamState& t) {
  if (!t.mapped || t.nr < 2 || !t.c->caps.cpu_atomics) return;
  const uint64_t k = static_cast<uint64_t>(t.cfg.lines);
  const uint64_t bytes = static_cast<uint64_t>(t.nr) * k * kLineBytes + 64;
  std::shared_ptr<BufferState> b;
  try {
    b = create_team_buffer(t, "collective workspace", "rwin.coll.lines", bytes, BufferState::Kind::Buffer, DType::I32,
                           Shape2{1, static_cast<int64_t>(bytes)}, "collective lines of " + std::to_string(bytes) + " bytes");
  } catch (const Error& e) {
    if (e.code() != ErrorCode::WindowMismatch) throw;
    throw Error(ErrorCode::CollectiveMismatch, t.c->who() + ": collective workspace on " + t.describe() +
                                                   ": the members' RWIN_COLL_LINES differ (this rank's is " +
                                                   std::to_string(k) + "; it must be the same on every member): " + e.what());
  }
  t.lines = u8_view(b, bytes);
  if (k == 0) return;
  for (int p = 0; p < t.nr; ++p) {
    if (p == t.me) continue;
    const char* m = t.lines->mapped(t.ranks[static_cast<size_t>(p)]);
    if (!m) {
      throw Error(ErrorCode::Transport, t.c->who() + ": collective workspace on " + t.describe() + ": team rank " +
                                            std::to_string(p) + "'s lines are not mapped here, though its memory is");
    }
    // Our lines there, faulted in now rather than one page fault in each of the first calls (see prefault).
    for (uint64_t i = 0; i < k * kLineBytes; i += 4096) {
      (void)*reinterpret_cast<const volatile char*>(m + static_cast<uint64_t>(t.me) * k * kLineBytes + i);
    }
  }
  t.nlines = k;
}

}  // namespace

// Slots per peer when RWIN_COLL_SLOTS is auto: as many as fit in 256 KiB per peer, 8 to 64. Small
// messages get a deep window, so a member running calls ahead (a broadcast's root) stalls on credit
// far less often (measured in bench/RESULTS.md). The window is the team's and only grows, so once a
// large call grew the slots, small calls get what large ones do: at least 8 (256 KiB chunks: 2 MiB
// per peer), which measured 1.4x faster tiny broadcasts after a large call than 4 did (acks come at
// half the window: 2 messages of credit), in shared memory and across hosts.
uint64_t auto_slots(uint64_t slot_bytes) {
  return std::clamp<uint64_t>((uint64_t{256} << 10) / slot_bytes, 8, 64);
}

void ensure_workspace(TeamState& t, uint64_t payload_bytes, const MsgHeader* h) {
  ContextImpl& c = t.live("collective workspace");
  const uint64_t want = std::min<uint64_t>((payload_bytes + 63) & ~uint64_t{63}, t.cfg.chunk_bytes);
  uint64_t slot = kHeaderBytes + std::max<uint64_t>(want, 64);
  if (t.signals && t.slot_bytes >= slot) return;
  // A phase of its own in the timeline: the first call (and a growth) registers and exchanges windows.
  TraceSpan span(c.trace.get(), "workspace", "coll");
  if (span.on()) span.event().bytes = payload_bytes;
  if (t.scratch && h) {
    // Growing is collective: first make sure every member grows in this call (a member with other
    // arguments, which does not, finds a handshake where it expects data: a mismatch on both sides).
    Exchange g;
    g.header = *h;
    g.header.phase = 1;
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      g.out.push_back(OutFlow{p, t.outbox, 0, 0});
      g.in.push_back(InFlow{p, 0});
    }
    g.final_acks = false;
    // Named for the call that grows it: a failure here is that collective's ("allreduce (its
    // workspace growth) on world: ...").
    const std::string what = std::string(coll_kind_name(static_cast<CollKind>(h->kind))) + " (its workspace growth)";
    run_exchange(t, g, what.c_str());
    // Every message any member sent into the old slots is now consumed (the new registration below
    // waits for every member, each past this handshake): acknowledge them all, so credits start
    // whole however the slot count changes (a lazy ack owed from 32 messages of a 64-deep window
    // would never come under a 4-deep one).
    for (int p = 0; p < t.nr; ++p) {
      if (p != t.me) send_acks(t, static_cast<size_t>(p));
    }
  }
  // Grow geometrically (slot payloads of 64 B, 128 B, ... up to the chunk size): few regrowths.
  uint64_t p = 64;
  while (p < want) p *= 2;
  slot = kHeaderBytes + std::min(p, t.cfg.chunk_bytes);
  const uint64_t k = t.cfg.slots > 0 ? static_cast<uint64_t>(t.cfg.slots) : auto_slots(slot);
  const uint64_t nr = static_cast<uint64_t>(t.nr);
  try {
    if (!t.signals) {
      const int64_t words = kDataWord + 3 * t.nr;
      auto v = std::make_shared<WindowState>();
      v->dtype = DType::I64;
      v->shape = {1, words};
      v->bytes = static_cast<size_t>(words) * 8;
      v->owns_buffer = true;
      v->is_signal = true;
      v->buf = create_team_buffer(t, "collective workspace", "rwin.coll.signals", v->bytes, BufferState::Kind::Signals,
                                  DType::I64, v->shape, "collective signals");
      t.signals = v;
      make_lines(t);
    }
    const uint64_t bytes = nr * k * slot;
    auto sb = create_team_buffer(t, "collective workspace", "rwin.coll.scratch", bytes, BufferState::Kind::Buffer,
                                 DType::I32, Shape2{1, static_cast<int64_t>(bytes)},
                                 "collective scratch of " + std::to_string(bytes) + " bytes");
    // Old regions: every message into them was consumed before this call began (each member
    // finished the previous call first), yet they stay registered until teardown, as free()'s do.
    auto retire = [&c](const std::shared_ptr<WindowState>& w) {
      if (!w) return;
      c.graveyard.push_back(std::move(w->buf->mr));
      w->buf->release();
      std::erase(c.buffers, w->buf);
    };
    retire(t.scratch);
    retire(t.outbox);
    t.scratch = u8_view(sb, bytes);
    // The outbox: local only (never a remote target; rkeys stay empty).
    auto ob = std::make_shared<BufferState>();
    ob->name = "rwin.coll.outbox";
    ob->bytes = bytes;
    ob->mr = c.tp->allocate(bytes);
    ob->rkeys.resize(static_cast<size_t>(c.nranks));
    ob->ctx = &c;
    c.buffers.push_back(ob);
    t.outbox = u8_view(ob, bytes);
    t.slot_bytes = slot;
    t.slots = k;
    prefault(t);
  } catch (const transport::TransportError& e) {
    throw Error(ErrorCode::Transport, c.who() + ": collective workspace on " + t.describe() + ": " + e.what());
  } catch (const Error& e) {
    if (e.code() != ErrorCode::WindowMismatch) throw;
    const std::string mine = h ? describe_header(*h) : "call #" + std::to_string(t.call_seq);
    throw Error(ErrorCode::CollectiveMismatch,
                c.who() + ": " + (h ? coll_kind_name(static_cast<CollKind>(h->kind)) : "collective") + " on " +
                    t.describe() + ": members need different scratch sizes, so their calls differ (this rank called " +
                    mine + "): " + e.what());
  }
}

}  // namespace rwin::detail

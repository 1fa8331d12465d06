// The collectives' message layer: messages with a header through per-peer slots under credits,
// mismatch reporting, and the dissemination barrier. The slots and counters themselves (the team
// workspace) are workspace.cpp's; Bruck's rounds over this layer are bruck.cpp's; the collectives'
// names and knobs are config.cpp's.
//
// A message from member s to member r goes to slot (n mod K) of r's scratch region for s, where n
// counts s's messages to r over the team's life (`sent` on s, `recvd` on r: both sides count alike
// because every member makes the same calls in the same order). s then adds 1 to r's data[s] word
// (ordered after the puts, rwin.h), r waits for data[s] >= n + 1, reads the slot and adds 1 to s's
// ack[r]. Where r's memory is mapped at s, s writes the slot itself and stores n + 1 last into the
// header's `seq`, which is all r polls: data[s] stays 0 (landed(), below). s writes slot n mod K
// again only for message n + K, after ack[r] >= n + 1: a slot is never overwritten before its reader
// is done with it. Counters only grow: nothing is reset between calls.
//
// Acks are lazy: r acknowledges at once a chunk that more of its flow follows (the sender's pipeline)
// and a message whose header says its sender waits for it (kAckNow), and otherwise adds up to K
// consumed messages into one ack. That never stalls a sender on a message r has consumed: with every
// sent message consumed, at most K - 1 are unacknowledged, and message n needs only ack >= n + 1 - K.
// A small collective's one message per peer then costs no ack in 3 calls of 4 (an 8-byte allreduce
// on 4 ranks sent 6 notifies per member, now 3.75).
//
// Lines: a team all in shared memory also has, per pair, RWIN_COLL_LINES (64) lines of 128 bytes with
// counts and credits of their own (line_sent, line_recvd, line_ack), which carry broadcasts of up to
// 64 bytes. The slots' depth falls to 8 once a large call grew them (auto_slots), and a tiny
// broadcast's root, which runs ahead of its receivers, then stalled on credit: 4 ranks, 8 bytes, 0.44
// us a call at 8 slots against 0.22 at 64 (bench/RESULTS.md, "Tiny broadcasts after a large call").
// Which way a message goes follows from the call alone (a broadcast of at most 64 bytes, the team
// mapped), so both ends agree; a member that runs another call finds the other's message landed where
// it does not look for one, in either kind, and reports the mismatch (Waiter::peek).

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <span>

#include "backoff.h"
#include "collectives/pull.h"
#include "collectives/team_state.h"
#include "ops.h"

namespace rwin::detail {

// ---------------------------------------------------------------------------------------------
// Calls, aborts, waiting

namespace {

int64_t data_word(const TeamState&, int p) { return kDataWord + p; }
int64_t ack_word(const TeamState& t, int p) { return kDataWord + t.nr + p; }
int64_t line_ack_word(const TeamState& t, int p) { return kDataWord + 2 * t.nr + p; }

SignalSlice sig_at(const TeamState& t, int64_t index) { return SignalSlice{t.signals, static_cast<uint64_t>(index) * 8, 1}; }

// Word `index` of team member q's signals when q's memory is mapped here (and CPU atomics may touch
// it), else null. The team's counters written through it have one writer each (this member).
int64_t* mapped_word(const TeamState& t, int q, int64_t index) {
  char* m = t.c->caps.cpu_atomics ? t.signals->mapped(t.ranks[static_cast<size_t>(q)]) : nullptr;
  return m ? reinterpret_cast<int64_t*>(m + static_cast<uint64_t>(index) * 8) : nullptr;
}

// Member q's scratch mapped here when its counters are too (its acks come through them): messages to
// q are then written straight into its slots. Else null: they go through the transport.
char* direct_to(const TeamState& t, int q) {
  return mapped_word(t, q, data_word(t, t.me)) ? t.scratch->mapped(t.ranks[static_cast<size_t>(q)]) : nullptr;
}
}  // namespace

bool messages_stored(const TeamState& t, int q) { return direct_to(t, q) != nullptr; }

namespace {

// Stores a counter that only this member writes into a mapped member's word, counted as the notify
// it replaces. A release store, not notify_direct's locked exchange: a locked instruction waits for
// this core's earlier stores to leave it, a store follows them (x86: in order), so a message costs
// one cache-line handover, not two. Release is enough here because everything it must order is
// rwin's own memcpy into mapped memory (glibc fences its non-temporal copies) or a put that quiet()
// completed; notify_direct keeps the full barrier for the user's notify, which may follow stores of
// unknown kind.
void store_count(TeamState& t, int q, int64_t* word, int64_t count) {
  std::atomic_ref<int64_t>(*word).store(count, std::memory_order_release);
  ++t.c->peer_stats[static_cast<size_t>(t.ranks[static_cast<size_t>(q)])].notifies;
}

[[noreturn]] void raise_abort(TeamState& t, const char* what) {
  const int64_t v = t.load(kAbortWord);
  const int d = static_cast<int>(v & 0xffff) - 1;
  throw Error(ErrorCode::CollectiveMismatch,
              t.c->who() + ": " + what + " on " + t.describe() + " (call #" + std::to_string(t.call_seq) +
                  "): team rank " + std::to_string(d) + " (job rank " +
                  std::to_string(d >= 0 && d < t.nr ? t.ranks[static_cast<size_t>(d)] : -1) +
                  ") found that the members' calls #" + std::to_string(static_cast<uint64_t>(v) >> 16) +
                  " differ (its error names both sides)");
}

}  // namespace

[[noreturn]] void report_mismatch(TeamState& t, int q, const MsgHeader& theirs, const MsgHeader& mine,
                                  const char* what, const std::string& detail) {
  for (int p = 0; p < t.nr; ++p) {
    if (p == t.me) continue;
    try {
      t.ctx->notify(sig_at(t, kAbortWord), t.ranks[static_cast<size_t>(p)],
                     static_cast<int64_t>(mine.call_seq << 16) | (t.me + 1), NotifyOp::Set);
    } catch (const Error&) {
      // best effort: that member then ends at its own deadline
    }
  }
  const bool foreign = theirs.magic != mine.magic || theirs.team_id != mine.team_id;
  if (detail.empty() && !foreign && theirs.call_seq == mine.call_seq &&
      theirs.kind == static_cast<uint8_t>(CollKind::AllToAllV) && mine.kind == theirs.kind && theirs.mode == kPullMode &&
      mine.mode == kPullMode && theirs.dtype == mine.dtype) {
    // all_to_all_v by pull, the same call on both ends but a message the other did not expect: each
    // pair decides by its own count whether the block is read in place (an offer) or sent (a
    // message), and the two ends decided differently, so they count it differently.
    throw Error(ErrorCode::CollectiveMismatch,
                t.c->who() + ": " + what + " on " + t.describe() + " (call #" + std::to_string(mine.call_seq) + "): " +
                    peer_name(t, q) + " and " + peer_name(t, t.me) +
                    " count the block between them differently (one end takes it for at least RWIN_COLL_PULL_MIN = " +
                    std::to_string(t.cfg.pull_min) + " bytes, read in place, the other for fewer: " +
                    describe_header(theirs) + " against " + describe_header(mine) + ")");
  }
  if (!detail.empty()) {
    throw Error(ErrorCode::CollectiveMismatch, t.c->who() + ": " + what + " on " + t.describe() + " (call #" +
                                                   std::to_string(mine.call_seq) + "): " + detail);
  }
  throw Error(ErrorCode::CollectiveMismatch,
              t.c->who() + ": " + what + " on " + t.describe() + ": team rank " + std::to_string(q) + " (job rank " +
                  std::to_string(t.ranks[static_cast<size_t>(q)]) + ") called " +
                  (foreign ? std::string("something else (an unrecognised message)") : describe_header(theirs)) +
                  ", team rank " + std::to_string(t.me) + " (job rank " + std::to_string(t.c->rank) + ") called " +
                  describe_header(mine));
}

std::string peer_name(const TeamState& t, int p) {
  return "team rank " + std::to_string(p) + " (job rank " + std::to_string(t.ranks[static_cast<size_t>(p)]) + ")";
}

namespace {

bool same_call(const MsgHeader& a, const MsgHeader& b) {
  return a.magic == b.magic && a.team_id == b.team_id && a.call_seq == b.call_seq && a.kind == b.kind &&
         a.dtype == b.dtype && a.op == b.op && a.mode == b.mode && a.count == b.count && a.root == b.root &&
         a.phase == b.phase;
}

uint64_t scratch_off(const TeamState& t, int sender, uint64_t n) {
  return (static_cast<uint64_t>(sender) * t.slots + n % t.slots) * t.slot_bytes;
}

// Message n (counted from 0) from team rank p has landed in our slot for it: its number in the
// header (a mapped sender's, MsgHeader::seq, stored last) or p's count in data[p] (a sender through
// the transport: its notify follows the slot's put). A mapped sender stores only the header: a
// second store into another of our lines cost each message one more cross-core handover, the
// sender's critical path (perf of a 2-rank 8-byte broadcast: the root stalled on it).
bool landed(const TeamState& t, int p, uint64_t n) {
  const char* slot = t.scratch->base() + scratch_off(t, p, n);
  const uint32_t seq = std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(const_cast<char*>(slot)))
                           .load(std::memory_order_acquire);
  if (seq != 0) return seq == static_cast<uint32_t>(n + 1);
  return t.load(data_word(t, p)) >= static_cast<int64_t>(n + 1);
}

uint64_t line_off(const TeamState& t, int sender, uint64_t n) {
  return (static_cast<uint64_t>(sender) * t.nlines + n % t.nlines) * kLineBytes;
}

// Line message n from team rank p has landed: only mapped senders write lines, so its number is
// always in the header.
bool line_landed(const TeamState& t, int p, uint64_t n) {
  const char* line = t.lines->base() + line_off(t, p, n);
  return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(const_cast<char*>(line))).load(std::memory_order_acquire) ==
         static_cast<uint32_t>(n + 1);
}

// A collective waits on several members at once, and members often outnumber cores (tests, one
// node): then (the core's spin window is 0, g_spin_us) it yields the core at every poll, and only
// after 20000 polls it sleeps (Backoff::YieldPolls: a yield may take a whole slice there). Where the
// ranks fit the CPUs it first spins the core's window (200 us) by time: a yield beside a CPU-bound
// process (a runtime computing beside its communication) hands that process the rest of a scheduler
// slice, milliseconds, and 2-rank 8-byte allreduces averaged 750 us against Open MPI's 0.36
// (bench/RESULTS.md).
constexpr Backoff::YieldPolls kCollYieldPolls{20000};

// One idle round of a wait: progress, a peer's abort, failures, the deadline. With `mine` (this
// call's header) and `in` (the call's inflows: what it still consumes from each member), it also
// looks at a landed message nobody will consume in this call: one of this very call
// and phase means that member runs something else (e.g. it thinks it is the root), a mismatch; so does
// one of an earlier call (nobody consumed it).
struct Waiter {
  TeamState& t;
  const char* what;
  Deadline deadline;
  Backoff backoff{kCollYieldPolls};
  uint64_t round = 0;
  const MsgHeader* mine = nullptr;
  std::span<const InFlow> in;  // what this call still consumes (empty: nothing, a barrier)
  Waiter(TeamState& ts, const char* w) : t(ts), what(w), deadline(ts.c->opt.op_timeout) {}
  // Both kinds of message: a member that sent through the lines where this one waits in the slots
  // (or the other way round) runs another call.
  void peek() {
    if (!mine || !t.scratch) return;
    for (int p = 0; p < t.nr; ++p) {
      if (p == t.me) continue;
      const size_t pi = static_cast<size_t>(p);
      bool pending = false, pending_line = false;  // this call still consumes p's next message / line
      for (const auto& f : in) {
        const bool more = f.peer == p && f.done < f.chunks;
        pending = pending || (more && !f.line);
        pending_line = pending_line || (more && f.line);
      }
      if (!pending && landed(t, p, t.recvd[pi])) check_unconsumed(p, t.scratch->base() + scratch_off(t, p, t.recvd[pi]));
      if (t.nlines && !pending_line && line_landed(t, p, t.line_recvd[pi])) {
        check_unconsumed(p, t.lines->base() + line_off(t, p, t.line_recvd[pi]));
      }
    }
  }
  // A landed message from p that this call does not consume. Of this very call and phase: that
  // member runs something else. Of an earlier call: a message no call of ours consumed (a member
  // acted as a root or sender where we did not), which every member that agreed would have.
  void check_unconsumed(int p, const char* at) {
    MsgHeader h;
    std::memcpy(&h, at, kHeaderBytes);
    if (h.team_id == mine->team_id &&
        (h.call_seq < mine->call_seq || (h.call_seq == mine->call_seq && h.phase == mine->phase))) {
      report_mismatch(t, p, h, *mine, what);
    }
  }
  // `waiting_for` names what is awaited, built only for an error (a template: a std::function made
  // from the caller's lambda allocated once per poll round).
  template <class WaitingFor>
  void idle(const WaitingFor& waiting_for) {
    ContextImpl& c = *t.c;
    // Where every peer is mapped here nothing arrives through the transport: housekeeping now and
    // then (as the core's signal waits do), so a poll of the counters is a few loads.
    if (!c.all_direct || (round & 15) == 15) c.progress();
    if (t.abort_now() != 0) raise_abort(t, what);
    if ((++round & 63) == 0) {
      peek();
      c.watch();
      if (c.failures_reported < c.known_failures.size()) {
        c.raise_new_failure(std::string(" in ") + what + " on " + t.describe() + " waiting for " + waiting_for());
      }
      if (deadline.passed()) {
        c.degraded = true;
        throw Error(ErrorCode::Timeout, c.who() + ": " + what + " on " + t.describe() + " (call #" +
                                            std::to_string(t.call_seq) + ") timed out after " +
                                            std::to_string(deadline.limit().count()) + " ms waiting for " +
                                            waiting_for() + " (did every member make the same call?)");
      }
    }
    backoff.idle();
  }
};

// Message number n = `sent` (t.sent[q]; for a line t.line_sent[q]) of header h (chunk, payload,
// total and flags set) into mapped member q's slot (or line) for it: the payload (or, for a flow of
// one message of up to 8 bytes, into the header), every header byte but `seq`, then `seq` = n + 1
// with release (what the receiver polls, landed()); `sent` is then n + 1. Counted as the put and the
// notify it replaces.
void write_slot(TeamState& t, int q, char* slot, MsgHeader h, const char* payload, uint64_t& sent) {
  const uint64_t len = h.payload, n = sent;
  if (len <= kInlineBytes && h.total == len) {
    h.flags |= kInline;
    h.total = 0;
    if (len) std::memcpy(&h.total, payload, len);
  } else if (len) {
    std::memcpy(slot + kHeaderBytes, payload, len);
  }
  // Every byte but `seq` (the receiver reads that word atomically while these stores go on), then it.
  std::memcpy(slot + kSeqBytes, reinterpret_cast<const char*>(&h) + kSeqBytes, kHeaderBytes - kSeqBytes);
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(slot)).store(static_cast<uint32_t>(n + 1), std::memory_order_release);
  PeerStats& st = t.c->peer_stats[static_cast<size_t>(t.ranks[static_cast<size_t>(q)])];
  ++st.notifies;
  ++st.puts;
  st.put_bytes += kHeaderBytes + len;
  sent = n + 1;
}

// q sent messages of the other kind (slot messages where `h` is a line, else lines) that this rank
// did not consume (check_message): named with the first of them where it is here to read.
[[noreturn, gnu::cold]] void report_unconsumed(TeamState& t, int q, const MsgHeader& h, const MsgHeader& mine,
                                               const char* what, bool line) {
  const uint64_t consumed = line ? t.recvd[static_cast<size_t>(q)] : t.line_recvd[static_cast<size_t>(q)];
  std::string first;
  if (line ? landed(t, q, consumed) : line_landed(t, q, consumed)) {
    MsgHeader o;
    std::memcpy(&o, line ? t.scratch->base() + scratch_off(t, q, consumed) : t.lines->base() + line_off(t, q, consumed),
                kHeaderBytes);
    first = ", the first of them " + describe_header(o);
  }
  report_mismatch(t, q, h, mine, what,
                  peer_name(t, q) + " sent " + (line ? "slot messages" : "lines") + " to team rank " + std::to_string(t.me) +
                      " that no call of this rank's consumed (" + std::to_string(consumed) + " consumed, " +
                      std::to_string(h.others) + " sent, low 16 bits" + first + "; this rank called " +
                      describe_header(mine) + ")");
}

// Member q's message `slot` (chunk j of a flow of `bytes` from it; a line if `line`) belongs to the
// call `mine`: otherwise both sides' calls are reported (report_mismatch). Returns its header's flags.
// Where there are lines, q must not have sent a message of the other kind that we did not consume:
// it would be of an earlier call, which no call of ours consumes any more (two members that each
// broadcast 8 bytes as the root leave a line in each other's lines that no slot ever runs into). The
// header says how many q had sent (MsgHeader::others): a compare, not a look into the other kind's
// next message (which cost every small collective 2-4 %, measured).
uint8_t check_message(TeamState& t, int q, const char* slot, const MsgHeader& mine, uint64_t j, uint64_t bytes,
                      uint64_t len, const char* what, bool line = false) {
  MsgHeader h;
  std::memcpy(&h, slot, kHeaderBytes);
  if (same_call(h, mine) && h.chunk == j && flow_total(h) != bytes) {
    // The same call, but the two ends count this flow differently (all_to_all_v's counts).
    const uint64_t esz = std::max<uint64_t>(1, dtype_size(static_cast<DType>(h.dtype)));
    const auto els = [esz](uint64_t b) { return std::to_string(b / esz) + " elements (" + std::to_string(b) + " bytes)"; };
    report_mismatch(t, q, h, mine, what,
                    "team rank " + std::to_string(q) + " (job rank " + std::to_string(t.ranks[static_cast<size_t>(q)]) +
                        ") sends " + els(flow_total(h)) + " to team rank " + std::to_string(t.me) + " (job rank " +
                        std::to_string(t.c->rank) + "), which expects " + els(bytes) + " from it");
  }
  if (!same_call(h, mine) || h.chunk != j || h.payload != len) report_mismatch(t, q, h, mine, what);
  if (t.nlines && h.others != static_cast<uint16_t>(line ? t.recvd[static_cast<size_t>(q)] : t.line_recvd[static_cast<size_t>(q)])) {
    report_unconsumed(t, q, h, mine, what, line);
  }
  return h.flags;
}

}  // namespace

MsgHeader begin_call(TeamState& t, CollKind kind, const char* what) {
  ContextImpl& c = t.live(what);
  c.check_owner(what);
  if (!t.broken.empty()) {
    throw Error(ErrorCode::CollectiveMismatch, c.who() + ": " + what + " on " + t.describe() +
                                                   ": the team is unusable after an earlier failed call: " + t.broken);
  }
  MsgHeader h;
  h.kind = static_cast<uint8_t>(kind);
  h.team_id = t.id;
  h.call_seq = ++t.call_seq;
  if (t.signals && t.abort_now() != 0) raise_abort(t, what);
  h.sender = t.me;
  return h;
}

void fail_call(TeamState& t, const std::string& why) {
  if (t.broken.empty()) t.broken = why;
}

void rethrow_in_call(const Error& e, TeamState& t, const char* what) {
  const std::string m = e.what();
  if (m.find(what) != std::string::npos) throw e;  // the collective's own message already says which
  // "rwin: peer failed: rank 0: put_nbi to peer 2: ..." -> the message after "rwin: <code's prose>: ".
  size_t at = m.find(": ");
  at = at == std::string::npos ? at : m.find(": ", at + 2);
  const std::string bare = at == std::string::npos ? m : m.substr(at + 2);
  throw Error(e.code(), bare + " (in " + what + " on " + t.describe() + ", call #" + std::to_string(t.call_seq) + ")");
}

void send_acks(TeamState& t, size_t q) {
  if (t.unacked[q] == 0) return;
  const int gq = t.ranks[q];
  if (int64_t* word = mapped_word(t, static_cast<int>(q), ack_word(t, t.me))) {
    store_count(t, static_cast<int>(q), word, static_cast<int64_t>(t.recvd[q]));  // the count consumed, not the increment
  } else {
    t.ctx->notify(sig_at(t, ack_word(t, t.me)), gq, static_cast<int64_t>(t.unacked[q]));
  }
  t.unacked[q] = 0;
}

// ---------------------------------------------------------------------------------------------
// Barrier: dissemination, round k notifies member (me + 2^k) mod NR and waits for its own word k
// to reach the barrier's sequence number (a faster member's next barrier only raises it further).

void team_barrier(TeamState& t, const char* what, const MsgHeader* h) {
  ContextImpl& c = t.live(what);
  if (t.nr == 1) {
    c.quiet(c.opt.op_timeout);
    return;
  }
  ensure_workspace(t, 0, nullptr);
  TraceSpan span(c.trace.get(), "team barrier", "coll");
  if (span.on()) span.detail(what);
  c.quiet(c.opt.op_timeout);  // every put/notify issued before is complete at its target
  const int64_t seq = static_cast<int64_t>(++t.barrier_seq);
  Waiter w(t, what);
  w.mine = h;
  // Across hosts: through the host leaders (hier.cpp), one notify per pair of leaders across, where the
  // dissemination rounds below cross hosts in most rounds. Every member of the team makes the same choice.
  if (const TeamState::Hosts* hosts = hier_hosts(t)) {
    const TeamState::Hosts& H = *hosts;
    const int host = H.host_of[static_cast<size_t>(t.me)];
    const int leader = H.leader[static_cast<size_t>(host)];
    const std::vector<int>& local = H.members[static_cast<size_t>(host)];
    // Adds 1 to member q's barrier word `k` (several members add to one word: an atomic add, never a store).
    auto add_one = [&](int q, int64_t k) {
      if (int64_t* word = mapped_word(t, q, kBarrierWord + k)) {
        std::atomic_ref<int64_t>(*word).fetch_add(1, std::memory_order_acq_rel);
        ++c.peer_stats[static_cast<size_t>(t.ranks[static_cast<size_t>(q)])].notifies;
        return;
      }
      PeerState& ps = c.peers[static_cast<size_t>(t.ranks[static_cast<size_t>(q)])];
      const bool unflushed = ps.unflushed;
      t.ctx->notify(sig_at(t, kBarrierWord + k), t.ranks[static_cast<size_t>(q)], 1);
      ps.unflushed = unflushed;  // as in the rounds below: the barrier's own words need no flush
    };
    // `stage()` names whom it waits for, built only for an error.
    auto await = [&](int64_t k, int64_t want, auto&& stage) {
      while (t.load(kBarrierWord + k) < want) {
        w.idle([&] {
          return stage() + " (barrier word " + std::to_string(k) + " at " + std::to_string(t.load(kBarrierWord + k)) +
                 ", want " + std::to_string(want) + ")";
        });
      }
    };
    if (t.me != leader) {
      add_one(leader, kHierArrived);
      await(kHierReleased, seq, [&] { return "the release from host leader " + peer_name(t, leader); });
      c.tp->sync_arrivals();  // see the end of this function
      return;
    }
    await(kHierArrived, seq * static_cast<int64_t>(local.size() - 1), [] { return std::string("this host's members"); });
    // The leaders: a dissemination barrier among them (round k: to leader host + 2^k, one writer per
    // word and round, as below). A count per word from several leaders would let a leader already in the
    // next barrier stand in for one still missing from this one.
    const int nh = static_cast<int>(H.members.size());
    for (int k = 0; (1 << k) < nh; ++k) {
      const int to = H.leader[static_cast<size_t>((host + (1 << k)) % nh)];
      if (int64_t* word = mapped_word(t, to, kBarrierWord + k)) {
        store_count(t, to, word, seq);
      } else {
        add_one(to, k);
      }
      await(k, seq, [&] {
        return "host leader " + peer_name(t, H.leader[static_cast<size_t>((host - (1 << k) + 2 * nh) % nh)]) +
               " in the leaders' round " + std::to_string(k);
      });
    }
    for (int q : local) {
      if (q != t.me) add_one(q, kHierReleased);
    }
    c.tp->sync_arrivals();
    return;
  }
  for (int k = 0; (1 << k) < t.nr; ++k) {
    const int to = (t.me + (1 << k)) % t.nr;
    const int job_to = t.ranks[static_cast<size_t>(to)];
    if (int64_t* word = mapped_word(t, to, kBarrierWord + k)) {
      store_count(t, to, word, seq);  // round k's partner's word has one writer: us
    } else {
      PeerState& ps = c.peers[static_cast<size_t>(job_to)];
      const bool unflushed = ps.unflushed;
      t.ctx->notify(sig_at(t, kBarrierWord + k), job_to, 1);
      // The barrier's own word needs no flush: no member reads it as data, and the next barrier's
      // quiet would otherwise pay a round trip for it (over tcp at 4 ranks, 1 in 2 barriers blocked
      // ~90 us on that flush). What the caller posted before is flushed above.
      ps.unflushed = unflushed;
    }
    while (t.load(kBarrierWord + k) < seq) {
      w.idle([&] {
        const int from = (t.me - (1 << k) + t.nr * 2) % t.nr;
        return peer_name(t, from) + " in barrier round " + std::to_string(k) + " (word " +
               std::to_string(t.load(kBarrierWord + k)) + ", want " + std::to_string(seq) + ")";
      });
    }
  }
  // What the transport's own thread landed here before the members' quiets (own tcp's receiver thread:
  // their puts) is ordered before the caller's next access, as Context::barrier does it
  // (Transport::sync_arrivals): the word that released us may have been written by a thread that
  // never synchronised with that one (a member on this host, through shared memory; TSan saw it).
  c.tp->sync_arrivals();
}

// ---------------------------------------------------------------------------------------------
// The message engine

namespace {

Slice bytes_of(const std::shared_ptr<WindowState>& w, uint64_t off, uint64_t n) {
  return Slice{w, {0, static_cast<int64_t>(off)}, {1, static_cast<int64_t>(n)}};
}

}  // namespace

void run_exchange(TeamState& t, Exchange& x, const char* what) {
  ContextImpl& c = *t.c;
  TraceSpan span(c.trace.get(), "exchange", "coll");
  if (span.on()) {
    span.detail(std::string(what) + " phase " + std::to_string(x.header.phase) + ", " + std::to_string(x.out.size()) +
                " out / " + std::to_string(x.in.size()) + " in flows");
  }
  const uint64_t cp = chunk_payload(t);
  const uint64_t k = t.slots;
  // Lazy acks go out when half the window is consumed, not all of it: a sender that runs ahead (a
  // broadcast's root, back-to-back calls) then finds credit again before it has used the last slot,
  // instead of stalling on every k-th message until the receiver has caught up completely.
  const uint64_t ack_every = (k + 1) / 2;
  uint64_t maxj = 0;
  for (auto& f : x.out) {
    f.chunks = chunk_count(t, f.bytes);
    f.next = 0;
  }
  for (auto& f : x.in) {
    f.chunks = chunk_count(t, f.bytes);
    f.done = 0;
    f.checked = false;
    maxj = std::max(maxj, f.chunks);
  }
  // The senders wait for this call's acknowledgements (below): every message asks for its ack at once.
  // So does a payload that goes to a member through the transport straight from the caller's memory
  // (above inline_max), which the caller may change once we return; one to a mapped member is copied
  // into its slot as it is sent.
  bool wait_acks = x.final_acks && !x.out.empty();
  if (!x.copy_sources && !x.sources_covered) {
    for (const auto& f : x.out) {
      wait_acks = wait_acks || (!f.raw && std::min(cp, f.bytes) > t.cfg.inline_max && !direct_to(t, f.peer));
    }
  }
  TeamState::ExchangeArrays& a = t.xa;
  if (a.busy) {
    throw Error(ErrorCode::Unsupported, c.who() + ": " + what + " on " + t.describe() +
                                            ": a collective exchange started inside another (internal error)");
  }
  struct Busy {
    bool& b;
    explicit Busy(bool& f) : b(f) { b = true; }
    ~Busy() { b = false; }
  } busy(a.busy);
  // Every entry is written in each round before consume() reads it: sized, not filled.
  std::vector<const char*>& parts = a.parts;
  std::vector<uint64_t>& lens = a.lens;
  if (parts.size() != x.in.size()) {
    parts.resize(x.in.size());
    lens.resize(x.in.size());
  }
  Waiter w(t, what);
  w.mine = &x.header;
  w.in = x.in;
  auto len_of = [cp](uint64_t bytes, uint64_t j) { return bytes == 0 ? 0 : std::min(cp, bytes - j * cp); };

  auto try_send = [&](OutFlow& f) {
    bool any = false;
    const size_t p = static_cast<size_t>(f.peer);
    const int gp = t.ranks[p];
    char* scratch_at = direct_to(t, f.peer);
    while (f.next < f.chunks && (!f.ready || f.next < *f.ready)) {
      const uint64_t n = t.sent[p];
      if (n + 1 > k && t.load(ack_word(t, f.peer)) < static_cast<int64_t>(n + 1 - k)) break;  // no credit
      const uint64_t j = f.next;
      const uint64_t len = len_of(f.bytes, j);
      MsgHeader h = x.header;
      h.chunk = static_cast<uint32_t>(j);
      h.payload = static_cast<uint32_t>(len);
      h.total = f.bytes;
      h.flags = wait_acks ? kAckNow : 0;
      h.others = static_cast<uint16_t>(t.line_sent[p]);
      h.seq = 0;  // set last, in a mapped member's slot only
      const uint64_t box = scratch_off(t, f.peer, n);  // outbox slot mirrors the remote slot index
      const uint64_t dst = scratch_off(t, t.me, n);
      const char* payload = (f.raw ? f.raw : f.src->base()) + f.offset + j * cp;
      if (char* slot = scratch_at ? scratch_at + dst : nullptr) {
        // The member's memory is mapped here: the message is written straight into its slot, its number
        // stored last into the header (MsgHeader::seq: what the receiver polls, landed()), counted as
        // the put and the notify they replace. A flow of one message of up to 8 bytes rides in the header.
        write_slot(t, f.peer, slot, h, payload, t.sent[p]);
        ++f.next;
        any = true;
        continue;
      }
      // Through the transport: the header from its second word on (MsgHeader::seq stays 0 there).
      char* staged = t.outbox->base() + box;
      std::memcpy(staged, &h, kHeaderBytes);
      const uint64_t hb = kHeaderBytes - kSeqBytes;
      if (len <= t.cfg.inline_max || x.copy_sources || f.raw) {
        if (len) std::memcpy(staged + kHeaderBytes, payload, len);
        t.ctx->put_nbi(bytes_of(t.scratch, dst + kSeqBytes, hb + len), gp, bytes_of(t.outbox, box + kSeqBytes, hb + len));
      } else {
        t.ctx->put_nbi(bytes_of(t.scratch, dst + kSeqBytes, hb), gp, bytes_of(t.outbox, box + kSeqBytes, hb));
        t.ctx->put_nbi(bytes_of(t.scratch, dst + kHeaderBytes, len), gp, bytes_of(f.src, f.offset + j * cp, len));
      }
      t.ctx->notify(sig_at(t, data_word(t, t.me)), gp, 1);
      t.sent[p] = n + 1;
      ++f.next;
      any = true;
    }
    return any;
  };

  uint64_t j = 0;
  for (;;) {
    bool progressed = false;
    for (auto& f : x.out) progressed |= try_send(f);
    if (j < maxj) {
      bool all = true;
      for (size_t i = 0; i < x.in.size(); ++i) {
        InFlow& f = x.in[i];
        if (j >= f.chunks) {
          parts[i] = nullptr;
          lens[i] = 0;
          continue;
        }
        const size_t q = static_cast<size_t>(f.peer);
        const uint64_t n = t.recvd[q];
        const char* slot = t.scratch->base() + scratch_off(t, f.peer, n);
        if (!landed(t, f.peer, n)) {
          all = false;
          continue;
        }
        if (!f.checked) {
          const uint8_t flags = check_message(t, f.peer, slot, x.header, j, f.bytes, len_of(f.bytes, j), what);
          f.inlined = flags & kInline;
          f.ack_now = flags & kAckNow;
          f.checked = true;
        }
        parts[i] = slot + (f.inlined ? kInlineOffset : kHeaderBytes);
        lens[i] = len_of(f.bytes, j);
      }
      if (all && x.send_before_consume) {
        for (auto& f : x.out) all = all && (f.next > j || f.next == f.chunks);
      }
      if (all) {
        if (x.consume) x.consume(j, parts, lens);
        for (size_t i = 0; i < x.in.size(); ++i) {
          InFlow& f = x.in[i];
          if (j >= f.chunks) continue;
          const size_t q = static_cast<size_t>(f.peer);
          t.recvd[q]++;
          f.done++;
          f.checked = false;
          if (++t.unacked[q] >= ack_every || f.ack_now || j + 1 < f.chunks) send_acks(t, q);
        }
        ++j;
        w.backoff.reset();
        continue;
      }
    }
    bool sends_done = true;
    for (auto& f : x.out) sends_done = sends_done && f.next == f.chunks;
    if (j >= maxj && sends_done) break;
    if (progressed) {
      w.backoff.reset();  // the backoff measures a stall, not the call
    } else {
      w.idle([&] {
        for (auto& f : x.in) {
          if (f.done == j && j < f.chunks) {
            return "chunk " + std::to_string(j) + " from " + peer_name(t, f.peer) + " (messages from it consumed: " +
                   std::to_string(t.recvd[static_cast<size_t>(f.peer)]) + ", the next not landed)";
          }
        }
        for (auto& f : x.out) {
          if (f.next < f.chunks) return "a free slot at " + peer_name(t, f.peer) + " (its acks: " +
                                        std::to_string(t.load(ack_word(t, f.peer))) + ")";
        }
        return std::string("progress");
      });
    }
  }
  (void)c;
  if (!wait_acks) return;
  for (auto& f : x.out) {
    const size_t p = static_cast<size_t>(f.peer);
    while (t.load(ack_word(t, f.peer)) < static_cast<int64_t>(t.sent[p])) {
      w.idle([&] {
        return "acknowledgements from " + peer_name(t, f.peer) + " (acks " + std::to_string(t.load(ack_word(t, f.peer))) +
               ", want " + std::to_string(t.sent[p]) + ")";
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The latency path: a flow of one message without run_exchange's per-call set-up

namespace {
void send_line_acks(TeamState& t, size_t q) {
  store_count(t, static_cast<int>(q), mapped_word(t, static_cast<int>(q), line_ack_word(t, t.me)),
              static_cast<int64_t>(t.line_recvd[q]));
  t.line_unacked[q] = 0;
}

// Consumes the next message from q, a slot's (recv_one) or a line's (recv_line), of `bytes` into
// `dst`: waits for it under the call's deadline, checks it against `mine`, acknowledges lazily.
void recv_single(TeamState& t, const MsgHeader& mine, int q, char* dst, uint64_t bytes, const char* what, bool line) {
  const size_t qi = static_cast<size_t>(q);
  const uint64_t n = line ? t.line_recvd[qi] : t.recvd[qi];
  const auto here = [&] { return line ? line_landed(t, q, n) : landed(t, q, n); };
  if (!here()) {
    InFlow f{q, bytes};
    f.chunks = 1;
    f.line = line;
    Waiter w(t, what);
    w.mine = &mine;
    w.in = std::span<const InFlow>(&f, 1);
    while (!here()) {
      w.idle([&] {
        return std::string(line ? "a line" : "chunk 0") + " from " + peer_name(t, q) + " (" + (line ? "lines" : "messages") +
               " from it consumed: " + std::to_string(n) + ", the next not landed)";
      });
    }
  }
  const char* at = line ? t.lines->base() + line_off(t, q, n) : t.scratch->base() + scratch_off(t, q, n);
  const uint8_t flags = check_message(t, q, at, mine, 0, bytes, bytes, what, line);
  if (bytes) std::memcpy(dst, at + (flags & kInline ? kInlineOffset : kHeaderBytes), bytes);
  if (line) {
    t.line_recvd[qi] = n + 1;
    if (++t.line_unacked[qi] >= (t.nlines + 1) / 2) send_line_acks(t, qi);
  } else {
    t.recvd[qi] = n + 1;
    if (++t.unacked[qi] >= (t.slots + 1) / 2 || (flags & kAckNow)) send_acks(t, qi);
  }
}
}  // namespace

bool send_one(TeamState& t, const MsgHeader& base, int q, const char* payload, uint64_t bytes) {
  if (bytes > chunk_payload(t)) return false;
  char* scratch = direct_to(t, q);
  if (!scratch) return false;
  const uint64_t n = t.sent[static_cast<size_t>(q)], k = t.slots;
  if (n + 1 > k && t.load(ack_word(t, q)) < static_cast<int64_t>(n + 1 - k)) return false;  // no credit
  MsgHeader h = base;
  h.chunk = 0;
  h.payload = static_cast<uint32_t>(bytes);
  h.total = bytes;
  h.flags = 0;  // the payload is in the slot: nobody waits for its acknowledgement
  h.others = static_cast<uint16_t>(t.line_sent[static_cast<size_t>(q)]);
  h.seq = 0;
  write_slot(t, q, scratch + scratch_off(t, t.me, n), h, payload, t.sent[static_cast<size_t>(q)]);
  return true;
}

bool recv_one(TeamState& t, const MsgHeader& mine, int q, char* dst, uint64_t bytes, const char* what) {
  if (bytes > chunk_payload(t)) return false;
  recv_single(t, mine, q, dst, bytes, what, false);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Lines (the top of this file): a broadcast's tiny message to and from a member in shared memory

void send_line(TeamState& t, const MsgHeader& mine, int q, const char* payload, uint64_t bytes, const char* what) {
  const size_t qi = static_cast<size_t>(q);
  const uint64_t n = t.line_sent[qi], k = t.nlines;
  const auto credit = [&] { return n + 1 <= k || t.load(line_ack_word(t, q)) >= static_cast<int64_t>(n + 1 - k); };
  if (!credit()) {
    Waiter w(t, what);
    w.mine = &mine;
    while (!credit()) {
      w.idle([&] {
        return "a free line at " + peer_name(t, q) + " (lines it consumed: " + std::to_string(t.load(line_ack_word(t, q))) +
               ", sent: " + std::to_string(n) + ")";
      });
    }
  }
  MsgHeader h = mine;
  h.chunk = 0;
  h.payload = static_cast<uint32_t>(bytes);
  h.total = bytes;
  h.flags = 0;
  h.others = static_cast<uint16_t>(t.sent[qi]);
  h.seq = 0;
  write_slot(t, q, t.lines->mapped(t.ranks[qi]) + line_off(t, t.me, n), h, payload, t.line_sent[qi]);
}

void recv_line(TeamState& t, const MsgHeader& mine, int q, char* dst, uint64_t bytes, const char* what) {
  recv_single(t, mine, q, dst, bytes, what, true);
}

}  // namespace rwin::detail

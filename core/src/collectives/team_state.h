// Internal state of a Team and its collective workspace (docs/CONTRACT.md, "Collectives").
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <memory_resource>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "collectives/reduce_math.h"
#include "collectives/tuning.h"
#include "context_impl.h"
#include "rwin/collectives.h"

namespace rwin::detail {

// The collectives' way to the core's state behind the public handles.
struct ContextAccess {
  static ContextImpl& impl(Context& c) { return *c.impl_; }
  static Window window(std::shared_ptr<WindowState> s) { return Window(std::move(s)); }
  static WindowBuffer buffer(std::shared_ptr<BufferState> b) { return WindowBuffer(std::move(b)); }
  static const std::shared_ptr<WindowState>& state(const Window& w) { return w.s_; }
};

// What every message of a collective call carries in front of its payload (64 bytes), so that a
// receiver can tell a peer that runs a different call from one that runs the same.
enum class CollKind : uint8_t { Broadcast = 1, Allgather, ReduceScatter, Allreduce, AllToAll, Barrier, AllToAllV };
const char* coll_kind_name(CollKind k) noexcept;

// A block of bytes of a member's view: `len` bytes at `off`.
struct Block {
  uint64_t off = 0, len = 0;
};

struct MsgHeader {
  // First, so that a message through the transport never writes it (its put starts after this word):
  // stored into a mapped member's slot, the message's number to it (1, 2, ...; low 32 bits), stored
  // last with release, so the receiver that polls this word sees the whole message without reading
  // the count word. 0 (never a message's number: the slot was zeroed at allocation) where the message
  // travels through the transport, whose receiver thread (own tcp) would otherwise write the word
  // that landed() reads atomically.
  uint32_t seq = 0;
  uint32_t magic = 0x52574343;  // "RWCC"
  uint8_t kind = 0;             // CollKind
  uint8_t dtype = 0;
  uint8_t op = 0;               // ReduceOp
  uint8_t mode = 0;             // the algorithm actually run (AllreduceMode Mesh/Ring; 0 otherwise)
  uint8_t phase = 0;            // 0: the call's data; 1: a workspace-growth handshake; 2: allreduce Ring's allgather;
                                // 3-10 pull (pull.h); 16 + k Bruck round k; 64-66 through the host leaders,
                                // 67-73 the chain along the hosts (hier.cpp); 75-76 rows pushed (data_movement.cpp)
  uint8_t flags = 0;            // kAckNow, kInline
  // Where there are lines (TeamState::nlines): how many messages of the other kind (lines for a slot's
  // message, slot messages for a line) the sender had sent to this receiver, low 16 bits; every one
  // belongs to an earlier call, so the receiver has consumed as many (check_message).
  uint16_t others = 0;
  uint64_t team_id = 0;
  uint64_t call_seq = 0;        // collective calls of this team so far, this one included
  int64_t count = 0;            // elements (allreduce, broadcast: the view's; others: S per row)
  int32_t root = -1;
  int32_t sender = -1;          // team rank
  uint32_t chunk = 0;           // chunk index within this call's stream to the receiver
  uint32_t payload = 0;         // payload bytes following the header
  // Payload bytes of the whole flow this message belongs to (all its chunks). kInline: the payload
  // itself, when the flow is this one message of at most 8 bytes (total = payload), so a small message
  // is one cache line.
  uint64_t total = 0;
};
static_assert(sizeof(MsgHeader) == 64);
static_assert(offsetof(MsgHeader, seq) == 0 && offsetof(MsgHeader, total) == 56);
constexpr uint64_t kHeaderBytes = sizeof(MsgHeader);
constexpr uint64_t kSeqBytes = 4;       // MsgHeader::seq, at offset 0
constexpr uint64_t kInlineOffset = 56;  // offsetof(MsgHeader, total)
constexpr uint64_t kInlineBytes = 8;
constexpr uint8_t kAckNow = 1;  // MsgHeader::flags: the sender waits for this message's acknowledgement in this call
constexpr uint8_t kInline = 2;  // MsgHeader::flags: the payload is in `total`'s place
// Lines (channel.cpp, "Lines"): a second window per pair for a broadcast's tiny messages on a team all
// in shared memory, of slots that hold a header and up to 64 payload bytes.
constexpr uint64_t kLineBytes = 128;
constexpr uint64_t kLinePayload = kLineBytes - kHeaderBytes;
inline uint64_t flow_total(const MsgHeader& h) { return h.flags & kInline ? h.payload : h.total; }
std::string describe_header(const MsgHeader& h);  // "allreduce f32 count 1024 op sum mode ring root -1"

// Tunables, read once per team from the environment (docs/CONFIG.md).
struct CollConfig {
  uint64_t chunk_bytes = 256 * 1024;  // RWIN_COLL_CHUNK_BYTES: payload bytes per message
  // RWIN_COLL_SLOTS: messages in flight per peer; 0 (unset, "auto"): by slot size, auto_slots().
  int slots = 0;
  // RWIN_COLL_LINES: lines per peer (kLineBytes each) for broadcasts of up to kLinePayload bytes on a
  // team all in shared memory; 0: none (they take the slots).
  int lines = 64;
  uint64_t mesh_max = 8 * 1024;       // RWIN_ALLREDUCE_MESH_MAX: Auto uses Mesh up to this many bytes (measured)
  bool mesh_max_set = false;          // the knob was set (else a measured rule comes first: tuning.cpp)
  // RWIN_COLL_BRUCK_MAX: on 3+ members not all mapped (TeamState::mapped), Bruck's log-depth rounds up
  // to this many bytes: allreduce Auto (the vector), allgather (a row), all_to_all (a member's whole
  // stage), reduce_scatter (NR x a member's data / 2: it gathers everything).
  uint64_t bruck_max = 64 * 1024;  // measured, bench/RESULTS.md (2026-12-05)
  bool bruck_max_set = false;      // the knob was set (else measured rules come first: tuning.cpp)
  AllreduceMode force = AllreduceMode::Auto;  // RWIN_ALLREDUCE
  // RWIN_COLL_COPY_MAX: a payload up to this to a member through the transport is copied into the
  // outbox (no final ack wait); larger ones go from the caller's memory and the call waits for their
  // acks. 64 KiB: measured over both tcp paths, bench/RESULTS.md (2026-12-05); verbs keeps 16 KiB
  // (its sends from the registered window copy nothing and an ack is a NIC round trip).
  uint64_t inline_max = 64 * 1024;
  // RWIN_COLL_PULL_MIN: allgather, all_to_all, reduce_scatter and allreduce Ring on a team all in
  // shared memory (TeamState::mapped) read blocks of at least this many bytes straight from the
  // members' windows (pull.h); 0: never.
  uint64_t pull_min = 8 * 1024;  // measured: break-even at 4 KiB blocks (4 and 8 ranks on 2 cores), 1.6-3.5x from 8 KiB
  // RWIN_COLL_HIER_MAX: allreduce (Auto) vectors and reduce_scatter data up to this many bytes, all_to_all
  // stages up to 4x, allgather rows and broadcast vectors up to 16x, on a
  // team whose members span hosts with some host holding two or more of them, gather through one leader
  // per host (hier.cpp). 0: never.
  uint64_t hier_max = 16 * 1024;
  // RWIN_COLL_CHAIN_LANES: how many members of each host fold a share of a large allreduce along the
  // hosts (hier_chain_allreduce); the others only lend their inputs and take the result. 0: auto.
  int chain_lanes = 0;
  // The algorithm of each call: RWIN_COLL_TUNING's rules, then the built-in ones made from the knobs above.
  std::shared_ptr<const TuningTable> tuning;
  // `transport`: the job's ("ucx", "tcp", "mixed", "verbs"), for defaults that depend on it.
  static CollConfig from_env(const std::string& transport);
};

// Counter words of a member's signal region. Every word only grows.
//   [0]                 abort: non-zero once some member found a mismatch: call_seq << 16 | (team rank + 1)
//                       (a member still in an earlier call finishes that one first)
//   [1, 1 + 32)         dissemination barrier, one word per round
//   [33, 33 + NR)       data[p]: messages from team rank p that have landed here
//   [33 + NR, 33 + 2NR) ack[p]: messages of ours that team rank p has consumed
//   [33 + 2NR, 33 + 3NR) line_ack[p]: lines of ours that team rank p has consumed (a count, stored)
constexpr int64_t kAbortWord = 0;
constexpr int64_t kBarrierWord = 1;
constexpr int64_t kDataWord = 33;
// The barrier through the host leaders (hier_hosts) counts members' arrivals at their leader and the
// leader's release in the last two barrier words (rounds 30-31 of a dissemination barrier, which no team
// of fewer than 2^30 members reaches); the leaders run a dissemination barrier among them in the first.
constexpr int64_t kHierArrived = 30, kHierReleased = 31;

struct TeamState : std::enable_shared_from_this<TeamState> {
  Context* ctx = nullptr;      // null once the context is gone
  ContextImpl* c = nullptr;
  uint64_t id = 0;             // 0: the world
  std::vector<int> ranks;      // job ranks in team-rank order
  std::vector<int> team_rank_of;  // job rank -> team rank, -1 for non-members
  int me = 0;
  int nr = 1;
  // Every other member's memory is mapped here (shared memory): a message is a few stores, so one
  // round of NR - 1 messages beats log2 NR rounds (Bruck) at every size measured. The same on every
  // member of a team within one host (mapping is per pair and symmetric); were it not, the members'
  // headers name different algorithms and the call ends in CollectiveMismatch, never in a hang.
  bool mapped = true;
  CollConfig cfg;
  uint64_t call_seq = 0;       // collective calls made (each sends headers with this)
  uint64_t barrier_seq = 0;
  uint64_t alloc_seq = 0;      // team window allocations (store keys)
  std::string broken;          // set after a failed call: every later call throws it again

  // Workspace, allocated at the first call that needs it and grown collectively.
  std::shared_ptr<WindowState> signals;  // int64 counters, registered for the team
  std::shared_ptr<WindowState> scratch;  // U8 [NR * slots * slot_bytes]: messages from each member
  std::unique_ptr<transport::MemoryRegion> outbox_mr;  // local: staged messages to each member
  std::shared_ptr<WindowState> outbox;   // a U8 view of a local-only buffer (never a remote target)
  uint64_t slot_bytes = 0;     // header + payload capacity of one slot (0: no scratch yet)
  uint64_t slots = 0;          // slots per peer of the current scratch (fixed between growths)
  std::vector<uint64_t> sent;  // messages sent to each team rank (team lifetime)
  std::vector<uint64_t> recvd; // messages consumed from each team rank
  std::vector<uint64_t> unacked;  // of those, not yet acknowledged (run_exchange: acks are lazy)
  // The lines (a team all in shared memory, RWIN_COLL_LINES > 0; made with the signals): U8 [NR *
  // nlines * kLineBytes] of which line (s, n mod nlines) takes line message n from member s, and
  // their own counts. nlines is 0 where there are none.
  std::shared_ptr<WindowState> lines;
  uint64_t nlines = 0;
  std::vector<uint64_t> line_sent, line_recvd, line_unacked;
  std::vector<char> gather;    // bruck_allgather's rows, rotated (kept: no allocation per call)
  std::vector<char> pack_out, pack_in;  // bruck_all_to_all's blocks of one round; hier_allgather's host blocks
  // The members by host (hier.cpp), from the hosts the ranks published at start-up; made at first use.
  struct Hosts {
    bool ready = false;
    bool pays = false;           // 2+ hosts, and some host holds 2+ members
    bool chain = false;          // 2+ hosts of one size (2+), each a run of consecutive team ranks
    std::vector<int> host_of;    // team rank -> host index (0.. in order of first appearance)
    std::vector<int> leader;     // host -> its lowest team rank
    std::vector<std::vector<int>> members;  // host -> team ranks, ascending
  } hosts;
  std::vector<char> hier;      // allreduce's rows from hier_allgather, in team-rank order (kept: no allocation per call)
  std::vector<int> hier_kids;  // hier_children's answer
  struct HierFlow {            // one flow of a hier.cpp exchange: plain memory out, or into `dst`
    int peer;
    const char* src;
    char* dst;
    uint64_t bytes;
  };
  std::vector<uint64_t> chain_words, chain_done;  // the chain's offers and "done" flags (hier.cpp; kept)
  std::vector<HierFlow> hier_out, hier_in;  // hier.cpp's flows of the current phase (kept: no allocation per call)
  // reduce_arrays' input pointers and a reduction's block offsets (kept: no allocation per call; a
  // call uses them only inside its own exchanges, which never nest).
  std::vector<const void*> inputs;
  std::vector<uint64_t> offsets;
  // all_to_all_v by pull (pull_pairs): each member's block to and from this one, what was pulled,
  // the offers (kept: four allocations per call cost a small call 10 %, measured).
  struct PairArrays {
    std::vector<Block> to, from;
    std::vector<uint64_t> pulled, their_pulled;
    std::vector<std::array<uint64_t, 4>> mine, theirs;
  } pa;
  // run_exchange's per-call arrays, kept so a small call allocates none of them. run_exchange never
  // nests (a workspace growth's handshake ends before the call's own exchange starts); it checks.
  struct ExchangeArrays {
    std::vector<const char*> parts;
    std::vector<uint64_t> lens;
    bool busy = false;
  } xa;
  // The tuning table's choice for a call of `bytes` (tuned_size_meaning: reduce_scatter passes its
  // data's bytes, counted here as NR x bytes / 2, saturating).
  // `users`: set to whether the rule came from the user's file (RWIN_COLL_TUNING), which also wins over
  // the hierarchy (hier_pays).
  CollAlgo algo(TunedColl coll, uint64_t bytes, bool* users = nullptr) const;
  // The last choice per collective: the other keys are the team's, so back-to-back calls of one size
  // skip the walk over the rules.
  struct AlgoMemo {
    bool valid = false;
    uint64_t bytes = 0;
    CollAlgo algo = CollAlgo::Direct;
    bool users = false;
  };
  mutable std::array<AlgoMemo, kTunedColls> algo_memo{};

  std::string describe() const;  // "team 3 {1, 3}" / "world"
  int64_t* word(int64_t index) const { return reinterpret_cast<int64_t*>(signals->base()) + index; }
  int64_t load(int64_t index) const;
  // An abort reported for this call or an earlier one (0 when none applies yet).
  int64_t abort_now() const { const int64_t v = load(0); return v != 0 && (static_cast<uint64_t>(v) >> 16) <= call_seq ? v : 0; }
  ContextImpl& live(const char* what) const;  // throws UseAfterFree once the context is gone
};

// team.cpp
// The members exchange one blob each through the bootstrap store under `tag` (namespaced by
// team id by the caller), keeping the transport progressing meanwhile. Returns blobs in team-rank order.
std::vector<std::vector<uint8_t>> team_exchange(TeamState& t, const std::string& tag, const std::vector<uint8_t>& mine,
                                                const char* what);
// A registered buffer of the team only (rkeys of non-members stay empty). kind: Window/Buffer/Signals.
std::shared_ptr<BufferState> create_team_buffer(TeamState& t, const char* what, const std::string& name, size_t bytes,
                                                BufferState::Kind kind, DType dtype, Shape2 shape,
                                                const std::string& describe);
TeamState& team_of(const std::shared_ptr<TeamState>& s, const char* what);
// team_of for a call that uses the context (a collective, a team window): refused from any thread
// but the collective worker's while the context is lent to it (ContextImpl::check_owner).
TeamState& team_call(const std::shared_ptr<TeamState>& s, const char* what);

// channel.cpp: workspace, the message engine, barrier.
// Scratch slots per peer when RWIN_COLL_SLOTS is auto, for slots of `slot_bytes` (header + payload).
uint64_t auto_slots(uint64_t slot_bytes);
// Collective; may grow. `h`: the call's header, for the growth handshake (none for a barrier).
void ensure_workspace(TeamState& t, uint64_t payload_bytes, const MsgHeader* h);
// `h`: the barrier call's header (Team::barrier), so that a member running another call is noticed.
void team_barrier(TeamState& t, const char* what, const MsgHeader* h = nullptr);
// A U8 [1, bytes] view of w's memory for the length of one call. Its shared_ptrs own nothing (aliasing
// constructor, no control block), so copying them into flows and slices costs no atomic and no locked
// reference-count update runs once the call's messages are stored: a locked instruction waits for those
// stores to leave the core (perf: ~30 % of a 2-rank 8-byte broadcast's root time sat on one). w, which
// the call holds, keeps the memory alive; a ByteView never outlives the call that made it.
class ByteView {
 public:
  explicit ByteView(const WindowState& w);
  ByteView(const ByteView&) = delete;
  ByteView& operator=(const ByteView&) = delete;
  const std::shared_ptr<WindowState>& ptr() const noexcept { return ptr_; }

 private:
  WindowState state_;
  std::shared_ptr<WindowState> ptr_;
};

// Where outgoing payload comes from: `ready` chunks (null: all) of `bytes` bytes at `offset` of `src`.
struct OutFlow {
  int peer = -1;  // team rank
  std::shared_ptr<WindowState> src;  // a U8 byte view
  uint64_t offset = 0;
  uint64_t bytes = 0;
  const uint64_t* ready = nullptr;   // chunks available so far (chain forwarding)
  const char* raw = nullptr;         // set: payload at raw + offset, plain memory (`src` unused), always staged
  // filled by the engine
  uint64_t chunks = 0, next = 0;
};
struct InFlow {
  int peer = -1;  // team rank
  uint64_t bytes = 0;
  // filled by the engine: chunks, those consumed; of the current chunk's message: header checked,
  // its sender waits for the ack (kAckNow), its payload rides in the header (kInline)
  uint64_t chunks = 0, done = 0;
  bool checked = false, ack_now = false, inlined = false;
  bool line = false;  // the message comes through the lines (recv_line), not the slots
};
// A callable borrowed for one run_exchange: two words, no allocation (a std::function allocated for
// every lambda of more than two captures, once per call). It binds only to a named callable, which
// outlives the exchange; a temporary does not compile.
template <class Sig>
class BorrowedFn;
template <class R, class... A>
class BorrowedFn<R(A...)> {
 public:
  BorrowedFn() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::remove_cv_t<F>, BorrowedFn>>>
  BorrowedFn(F& f) noexcept  // NOLINT(google-explicit-constructor): assigned from a named lambda
      : obj_(&f), call_([](void* o, A... a) -> R { return (*static_cast<F*>(o))(std::forward<A>(a)...); }) {}
  explicit operator bool() const noexcept { return call_ != nullptr; }
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_ = nullptr;
  R (*call_)(void*, A...) = nullptr;
};

// One call's messages: sends every OutFlow in chunks (as credits allow) and receives every InFlow;
// `consume(j, parts)` runs once chunk j of every InFlow that has one has landed (parts[i]: payload of
// inflow i's chunk j, or null when that inflow has fewer chunks; bytes in `lens`). Then acks them.
// `final_acks`: wait until every member we sent to consumed everything (sources reusable,
// and a mismatch any receiver found reaches us).
struct Exchange {
  Exchange() = default;
  Exchange(const Exchange&) = delete;  // the flows point into `arena_`
  Exchange& operator=(const Exchange&) = delete;
  MsgHeader header;

 private:
  // The flows of up to ~8 members live in the call's frame (a small call allocates nothing for them),
  // more come from the heap.
  alignas(std::max_align_t) std::byte arena_[2048];
  std::pmr::monotonic_buffer_resource mem_{arena_, sizeof arena_};

 public:
  std::pmr::vector<OutFlow> out{&mem_};
  std::pmr::vector<InFlow> in{&mem_};
  BorrowedFn<void(uint64_t j, const std::vector<const char*>& parts, const std::vector<uint64_t>& lens)> consume;
  bool final_acks = true;
  // Copy every payload into the outbox (the source may change while the call runs: in place).
  bool copy_sources = false;
  // Consume chunk j only once it has been sent to every OutFlow (in place: the input goes first).
  bool send_before_consume = false;
  // A later phase of the same call waits for what this one sent (allreduce's reduce-scatter):
  // no wait for acks here even when payload went straight from the caller's memory.
  bool sources_covered = false;
};
void run_exchange(TeamState& t, Exchange& x, const char* what);
// Whether this member's messages to member q are stored straight into q's slots (mapped) rather than
// put through the transport.
bool messages_stored(const TeamState& t, int q);
// The latency path of a flow of one message (what run_exchange does for it, without its per-call
// set-up: a 2-rank 8-byte broadcast's root spent most of its time there). send_one writes message
// `bytes` <= the chunk payload straight into member q's slot and returns true, or sends
// nothing and returns false when q is not mapped here or has no free slot (the caller then runs an
// exchange with that flow). recv_one consumes the next message from q (any transport) into `dst`,
// checked against `mine` like run_exchange's, waiting under the call's deadline; false (nothing
// consumed) when `bytes` is more than one message.
bool send_one(TeamState& t, const MsgHeader& mine, int q, const char* payload, uint64_t bytes);
bool recv_one(TeamState& t, const MsgHeader& mine, int q, char* dst, uint64_t bytes, const char* what);
// A broadcast of `bytes` goes through the lines: every member of the team decides alike (the team
// is all in shared memory on every member, TeamState::mapped, and RWIN_COLL_LINES is the same,
// which the lines' registration checks). send_line waits for a free line at q (under the call's
// deadline, never falling back to the slots: the receiver looks for the message in the lines);
// recv_line consumes the next line from q into `dst`, checked against `mine`.
inline bool uses_lines(const TeamState& t, uint64_t bytes) { return t.nlines > 0 && bytes <= kLinePayload; }
void send_line(TeamState& t, const MsgHeader& mine, int q, const char* payload, uint64_t bytes, const char* what);
void recv_line(TeamState& t, const MsgHeader& mine, int q, char* dst, uint64_t bytes, const char* what);
// Bruck's allgather: ceil(log2 NR) rounds of one message each; in round k (distance d = 2^k) a member
// sends the min(d, NR - d) rows it holds to team rank me - d and receives as many from me + d. `row`
// bytes of `mine` in, t.gather out: NR rows, row i from team rank (me + i) mod NR. Every round is an
// exchange of this call with phase 16 + k. The caller sized the workspace: bruck_workspace(t, row).
void bruck_allgather(TeamState& t, const MsgHeader& h, const char* mine, uint64_t row, const char* what);
// Bruck's all_to_all: `stage` holds NR blocks of `block` bytes, block p for team rank p; `data` gets
// block q from team rank q. Rounds as above, each sending the blocks whose rotated index has bit k set.
void bruck_all_to_all(TeamState& t, const MsgHeader& h, const char* stage, char* data, uint64_t block, const char* what);
uint64_t bruck_largest_message(int nr, uint64_t row);  // bytes of the largest round's message
// hier.cpp: two-level gathering for teams across hosts. hier_pays: whether a call of `bytes` (the
// vector, a row) goes through it (RWIN_COLL_HIER_MAX, the team's hosts, no rule of the user's tuning
// file for it; the same answer on every member of a matching call). hier_allgather: every member ends with all NR rows of `row` bytes at `out`, in
// team-rank order (`mine` may be out's own row): each member's row to its host's leader, the leaders' host blocks to each other, the
// whole to every member from its leader (phases 64, 65, 66 of this call). The caller sized the
// workspace: ensure_workspace(t, NR x row).
bool hier_pays(TeamState& t, TunedColl coll, uint64_t bytes);
void hier_allgather(TeamState& t, const MsgHeader& h, const char* mine, uint64_t row, char* out, const char* what);
constexpr uint8_t kHierMode = 7;  // MsgHeader::mode of a call that goes through the host leaders
// Larger allreduce and reduce_scatter across hosts (Auto, above RWIN_COLL_HIER_MAX), on a team whose
// hosts hold equal runs of consecutive team ranks (Hosts::chain): the k-th member of every host folds
// block k of the vector (allreduce: the first RWIN_COLL_CHAIN_LANES members) or the rows of every
// host's k-th member (reduce_scatter), the fold carried from host to host in team-rank order
// (reduce_fold), so one block per lane crosses each pair of hosts where the flat Ring sends every
// member's blocks to every member. The same bits as Mesh/Ring/Bruck. Phases 67-73 of the call, mode
// kHierChainMode. hier_chain_pays: whether a call of `bytes` (allreduce's vector, reduce_scatter's
// data) goes this way (reduce_scatter only where the flat exchange would carry twice its bytes across).
bool hier_chain_pays(TeamState& t, TunedColl coll, uint64_t bytes);
// How many members of each host fold a share (RWIN_COLL_CHAIN_LANES, at most the host's members): the
// call's MsgHeader::root, so members whose setting differs find a mismatch at the first message.
int hier_chain_lanes(TeamState& t);
void hier_chain_allreduce(TeamState& t, const MsgHeader& h, ReduceOp op, const WindowState& src, const WindowState& dst,
                          const char* what);
// reduce_scatter the same way: member i of every host folds the rows of every host's member i, the last
// host's member i gives each its row (`out`: this member's); data is read in place, so a last round
// among each host's members says they are done with each other's data.
void hier_chain_reduce_scatter(TeamState& t, const MsgHeader& h, ReduceOp op, const WindowState& data, char* out,
                               const char* what);
constexpr uint8_t kHierChainMode = 8;
constexpr uint8_t kPushMode = 9;  // allgather / all_to_all rows pushed into the members' views (data_movement.cpp)
// all_to_all through the host leaders: each member's whole stage (NR blocks of `block` bytes) to its
// leader, each leader to each other leader the blocks of its members for that host's members, each
// leader to each member its NR blocks (`data`, row s from member s). Phases 64-66.
void hier_all_to_all(TeamState& t, const MsgHeader& h, const char* stage, char* data, uint64_t block, const char* what);
// broadcast's tree through the host leaders: the root sends to the other hosts' leaders and to its own
// host's members, each other leader to its host's members. hier_parent: whom this member receives from
// (-1: it is the root); hier_children: whom it sends to, in order (t.hier_kids, valid until the next call).
int hier_parent(TeamState& t, int root);
// The team's hosts when its barrier goes through the host leaders (RWIN_COLL_HIER_MAX > 0, 3+ members,
// hier_pays' layout rule), else null.
const TeamState::Hosts* hier_hosts(TeamState& t);
const std::vector<int>& hier_children(TeamState& t, int root);
// After bruck_allgather with rows of `row` bytes: team rank q's row.
const char* gathered(const TeamState& t, int q, uint64_t row);
uint64_t chunk_count(const TeamState& t, uint64_t bytes);  // max(1, ceil(bytes / chunk payload))
uint64_t chunk_payload(const TeamState& t);                // payload bytes per message now

// Tells every other member that the calls differ (so that each one's wait ends now, not at its
// deadline), then throws CollectiveMismatch naming both sides' calls; `detail`, when given, says what
// differs instead of the two headers (all_to_all_v's counts).
[[noreturn]] void report_mismatch(TeamState& t, int q, const MsgHeader& theirs, const MsgHeader& mine, const char* what,
                                  const std::string& detail = std::string());
std::string peer_name(const TeamState& t, int p);  // "team rank 2 (job rank 5)"
// Acknowledges to member q what this member consumed from it and has not acknowledged yet.
void send_acks(TeamState& t, size_t q);

// Starts a call: checks the team is usable, bumps call_seq, returns the header to fill.
MsgHeader begin_call(TeamState& t, CollKind kind, const char* what);
// A call that threw: the team is marked broken (every later call says so).
void fail_call(TeamState& t, const std::string& why);
// Rethrows `e`, raised inside collective `what` on t, naming the collective where its message does not
// (a data-path error: "put_nbi to peer 2: peer 2 failed ... (in allreduce on world, call #3)").
[[noreturn]] void rethrow_in_call(const Error& e, TeamState& t, const char* what);

}  // namespace rwin::detail

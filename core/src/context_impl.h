// Internal state behind rwin::Context, Window and SignalArray.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "backoff.h"
#include "reg_cache.h"
#include "staging.h"
#include "trace.h"
#include "bootstrap/bootstrap.h"
#include "rwin/rwin.h"
#include "transport/transport.h"

namespace rwin::bootstrap {
class PmixSession;  // bootstrap/pmix.h
}

namespace rwin::detail {

struct ContextImpl;
struct TeamState;  // collectives/team_state.h
class CollWorker;  // collectives/nonblocking.cpp

// One collectively allocated registered region: a window buffer (alloc_window_buffer), the buffer
// behind an alloc_window, or a signal array. The context holds every live one and releases its
// native resources at free() or at its own destruction, whichever is first; views and handles that
// outlive that only ever see `ctx == nullptr` (UseAfterFree).
struct BufferState {
  enum class Kind : uint8_t { Window, Signals, Buffer } kind = Kind::Buffer;
  ContextImpl* ctx = nullptr;
  std::string name;
  size_t bytes = 0;
  std::unique_ptr<transport::MemoryRegion> mr;
  std::vector<std::unique_ptr<transport::RemoteKey>> rkeys;  // index = peer; null: not a member of its team
  // index = peer: where this process loads and stores that peer's byte 0 of the buffer when the
  // transport maps the peer's memory here (Transport::mapped: UCX direct mode, shared memory), else
  // null. put, get and notify to such a peer are CPU copies and atomics done by the core itself
  // (transfer.cpp, signals.cpp): complete on return, no Work and no completion record.
  std::vector<char*> mapped;
  // A team's buffer (collectives): who may be a peer on it, and how free() synchronises (the team's
  // barrier instead of the job's).
  std::string team;  // "team 3 {1, 3}"; empty: the job's
  std::function<void()> team_sync;
  uint32_t trace_name = 0;  // its name's Tracer::intern id once a traced operation named it (0: not yet)

  std::string describe() const;  // "buffer 'b' (65536 bytes)"
  void release() noexcept;       // drops native resources; the buffer becomes "freed"
};

// A typed 2-D view of a buffer at a byte offset: what Window, Slice, SignalArray and SignalSlice
// handles share. Views are local objects; the remote side of an operation names the peer's copy of
// the same buffer at the same byte offset (the symmetric-memory rule: every rank makes its views
// alike).
struct WindowState {
  std::shared_ptr<BufferState> buf;
  DType dtype = DType::I64;
  Shape2 shape{0, 0};
  size_t bytes = 0;         // shape[0] * shape[1] * dtype_size
  uint64_t offset = 0;      // byte offset of element [0, 0] in the buffer
  bool owns_buffer = false; // made by alloc_window/alloc_signals: freeing it frees the buffer
  bool is_signal = false;   // a SignalArray's view (put/get refuse it)

  const std::string& name() const noexcept { return buf->name; }
  ContextImpl* ctx() const noexcept { return buf->ctx; }
  char* base() const noexcept { return static_cast<char*>(buf->mr->addr()) + offset; }
  const transport::MemoryRegion* mr() const noexcept { return buf->mr.get(); }
  const transport::RemoteKey& rkey(int peer) const noexcept { return *buf->rkeys[static_cast<size_t>(peer)]; }
  uint64_t remote_base(int peer) const noexcept { return rkey(peer).base() + offset; }
  // The peer's copy of element [0, 0] mapped here, or null (BufferState::mapped).
  char* mapped(int peer) const noexcept {
    char* m = buf->mapped.empty() ? nullptr : buf->mapped[static_cast<size_t>(peer)];
    return m ? m + offset : nullptr;
  }
  std::string describe() const;  // "'y' f32[4x1024] (16384 bytes)", plus " at byte 64 of buffer 'b'" for views
};

// The deadline of one operation, read from the clock only once somebody actually waits: an
// operation that completes at once never pays for clock_gettime (~20-25 ns under a hypervisor,
// a fifth of a shared-memory put). The first passed() starts the clock and answers false, so
// the limit counts from the first wait, microseconds after the call began at most.
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds limit) noexcept : limit_(limit) {}
  bool passed() noexcept {
    const auto now = std::chrono::steady_clock::now();
    if (!started_) {
      started_ = true;
      at_ = now + limit_;
      return false;
    }
    return now > at_;
  }
  std::chrono::milliseconds limit() const noexcept { return limit_; }

 private:
  std::chrono::milliseconds limit_;
  bool started_ = false;
  std::chrono::steady_clock::time_point at_{};
};

// A blocking transfer (put/get/accumulate) counts its own chunks in flight.
struct Transfer {
  int inflight = 0;
  std::string error;
};

// What a cookie stands for until its completion arrives.
struct Slot {
  // Chunk: part of a blocking transfer (put/get chunks, put(Add) slot writes); Async: counted in
  // the peer's outstanding work (notify, put_nbi/get_nbi chunks, put(Add) posted/acked bumps);
  // Flush: likewise, and clears the peer's dirty state; Fetch: a non-blocking fetching atomic,
  // outstanding like Async, its FetchOp in ContextImpl::fetch_ops[index].
  enum Kind : uint8_t { Chunk, Async, Flush, Fetch } kind = Chunk;
  int peer = -1;
  Transfer* transfer = nullptr;  // Chunk
  uint64_t index = 0;            // Chunk: chunk number (for messages); Fetch: its FetchOp
  uint64_t total = 0;            // Chunk: chunks in the transfer
};

// A non-blocking fetching atomic in flight (atomics.cpp). Each has its own registered result word
// (never a shared one: issue 23 item 1); at its completion progress() writes the widened old value
// to `out`. 32-bit elements are a compare-and-swap loop that progress() re-posts until it hits.
struct FetchOp {
  int64_t* out = nullptr;                       // the caller's fetch location; null: detached
  uint64_t* result = nullptr;                   // a word of ContextImpl::fetch_pool
  const transport::MemoryRegion* result_mr = nullptr;
  std::shared_ptr<BufferState> buf;             // keeps the target's key alive for a retry
  transport::Work work;                         // the op as posted (a retry re-posts it)
  DType dtype = DType::I64;
  uint8_t kind = 0;                             // atomics.cpp's Fetch
  bool cas_loop = false;                        // 32-bit: CAS on the word until it hits
  unsigned shift = 0;                           // 32-bit: the element's lane in the word
  int64_t operand = 0, compare = 0;
  uint64_t byte = 0;                            // the element's byte offset in its buffer (messages)
};

struct PeerState {
  bool ordered = false;        // the transport lands an atomic after earlier writes to this peer
  bool direct = false;         // its memory is mapped here (Transport::rma_mode "direct"): every op
                               // to it completes inside the call, so fence/quiet have nothing to wait for
  bool dirty = false;          // writes posted since the last flush (matters when the transport
                               // does not order writes before atomics)
  bool unflushed = false;      // anything that modifies the peer's memory posted since the last
                               // flush; a non-fetching atomic completes locally long before it lands
  int64_t outstanding = 0;     // notifies and flushes posted, not completed
  std::string failed;          // sticky failure
};

// What the bootstrap told us about a rank that died, for messages ("peer 2 failed (its bootstrap
// connection closed 1.2 s ago)").
struct KnownFailure {
  int rank = -1;
  std::string how;
  std::chrono::steady_clock::time_point when;
};

// The staging protocol of put(Add) (staging.h): this rank's region and every peer's, and the
// counters of both directions.
struct StagingState {
  std::unique_ptr<transport::MemoryRegion> mr;  // this rank's staging region (layout `mine`)
  StagingLayout mine;
  std::vector<StagingLayout> layouts;                       // index = peer: the layout of its region
  std::vector<std::unique_ptr<transport::RemoteKey>> rkeys;  // index = peer
  std::vector<uint64_t> posted_to;     // per target: slots this rank posted to it
  std::vector<uint64_t> applied_from;  // per source: its slots applied here
  std::vector<uint64_t> ack_owed;      // per source: applied, ack not yet posted (transport busy)
  std::vector<uint8_t> ack_queued;     // per source: in ack_retry
  std::vector<int> ack_retry;          // sources whose ack the transport was too busy for
  BellScan bells;                      // the target's doorbell accounting and work counters (staging.h)
  bool applying = false;               // inside apply_staged(): progress() must not recurse into it
  uint64_t* word(uint64_t offset) const noexcept {
    return reinterpret_cast<uint64_t*>(static_cast<char*>(mr->addr()) + offset);
  }
};

struct ContextImpl {
  Options opt;
  int rank = 0;
  int nranks = 1;
  int ranks_here = 1;  // the job's ranks on this host (start-up), for the spin window (backoff.h)
  std::vector<int> host_of;  // each rank's host (equal numbers share one; start-up, RWIN_HOST_ID): collectives' hierarchy
  int cpus_here = 0;   // the CPUs those ranks may run on together (union of affinity masks; 0: unknown)
  int min_host_cpus = 0;  // the same for the host with the fewest (every rank computes the same; 0: unknown)
  std::string chunk_from, depth_from;  // where chunk_bytes / pipeline_depth came from (start-up log)
  // Declaration order matters: members are destroyed in reverse, so windows go before the
  // transport and the transport before the bootstrap it may still talk through.
  // Where rank, size and root came from (options_from_env, pmix_start): for messages and logs.
  bootstrap::LaunchEnv launch;
  // Under the PMIx bootstrap, the process's PMIx session (bootstrap/pmix.h; finalized at exit), declared
  // before bs so that it outlives the bootstrap it started.
  std::shared_ptr<bootstrap::PmixSession> pmix;
  std::unique_ptr<bootstrap::Bootstrap> bs;
  std::unique_ptr<transport::Transport> tp;
  transport::Capabilities caps;
  // Every buffer not yet freed, held here (not only by the user's handles): its memory is
  // released at free() after a barrier, or at teardown after the transport is quiesced, never
  // when the last handle happens to go (a peer may still be writing into it).
  std::vector<std::shared_ptr<BufferState>> buffers;
  // Regions freed while a peer might still write into them (free() whose barrier failed): kept
  // registered until the transport is quiesced at teardown.
  std::vector<std::unique_ptr<transport::MemoryRegion>> graveyard;
  std::unique_ptr<transport::MemoryRegion> scratch;  // registered 8-byte result slots for atomics
  // Result words of non-blocking fetching atomics: registered pages carved into 8-byte words,
  // grown on demand, each word owned by one FetchOp while it is in flight. Declared after `tp`,
  // so they go before it (after ~ContextImpl quiesced it).
  std::vector<std::unique_ptr<transport::MemoryRegion>> fetch_pool;
  std::vector<std::pair<uint64_t*, const transport::MemoryRegion*>> free_fetch_words;
  std::unique_ptr<StagingState> staging;             // put(Add) staging (staging.cpp); goes with the
                                                     // buffers, after quiesce
  // Registrations of plain local memory (rwin::Local); goes before the transport, after quiesce.
  std::unique_ptr<RegCache> regcache;
  // Cache entries pinned by put_nbi/get_nbi from plain memory: released once no operation is
  // outstanding to any peer (quiet, barrier, or a drain that leaves nothing in flight).
  std::vector<const transport::MemoryRegion*> nbi_pins;
  std::vector<PeerState> peers;
  std::vector<int> quiet_peers;  // quiet()'s peers with a flush in flight (kept: no allocation per call)
  // Context::stats(): per peer, and the context's own (waits, tests, quiet/barrier). Mutable: the
  // CPU-copy paths count through a const ContextImpl.
  mutable std::vector<PeerStats> peer_stats;
  Stats own_stats;  // its `peers` and `total` stay empty: stats() fills them (wait_ns from wait_ticks)
  uint64_t wait_ticks = 0;  // blocked waits' time in ticks (ticks.h), turned into ns by `clock`
  TickAnchor clock;
  // What stats() last reported: each call converts only the ticks added since, so wait_ns never
  // moves without a blocked wait (the anchor's ratio is re-measured at every conversion, and the same
  // ticks converted twice could differ by a few ns: a soft-RoCE guest's pytest saw it).
  mutable uint64_t wait_ticks_reported = 0, wait_ns_reported = 0;
  // RWIN_TRACE (trace.h): null when off, so every hook costs one test of this pointer.
  std::unique_ptr<Tracer> trace;
  uint64_t born_ns = 0;  // when the Context's constructor started (the start-up span)
  // The span of the put/get call in progress, whose bytes and chunks the data path adds (transfer.cpp).
  mutable TraceSpan* open_span = nullptr;
  std::vector<Slot> slots;
  std::vector<uint32_t> free_slots;
  std::vector<FetchOp> fetch_ops;       // index: Slot::index of a Fetch slot
  std::vector<uint32_t> free_fetch_ops;
  std::vector<uint32_t> fetch_retry;    // Fetch slots whose CAS (re)try progress() is to post
  // 32-bit nbi CAS loops per (peer, remote word), in issue order: the front one is in flight, the
  // rest wait for it and then start from the value it left. All in flight at once would each miss
  // all but one (a convoy quadratic in their number).
  std::map<std::pair<int, uint64_t>, std::deque<uint32_t>> cas_chains;
  std::vector<transport::Completion> completions;
  // The one blocking single-chunk op in flight (see run_single): its cookie carries kSyncBit and a
  // sequence number, so a late completion of an abandoned one is never taken for the current one.
  static constexpr uint64_t kSyncBit = uint64_t{1} << 63;
  uint64_t sync_cookie = 0;
  uint64_t sync_seq = 0;
  bool sync_done = false;
  std::string sync_error;

  // Last value seen per (peer, remote 8-byte word) by an int32 notify's CAS loop: the next guess.
  std::map<std::pair<int, uint64_t>, uint64_t> cas_guess;

  // Peer liveness (see watch()).
  std::vector<KnownFailure> known_failures;  // every failed peer learned, in order
  size_t failures_reported = 0;  // how many of them a wait/test has already raised (each once)
  std::chrono::steady_clock::time_point next_watch{};
  uint32_t test_calls = 0;
  // Every peer (self included) is direct: nothing reaches this process's memory through the
  // transport, so a wait needs the transport's progress only now and then (housekeeping).
  bool all_direct = false;
  uint32_t test_progress = 0;  // test() calls, to progress every 16th when all_direct
  // Set once an operation timed out or a peer failed: shutdown then skips its barrier (it could
  // only wait for a rank that is gone or stuck) and leaves within a short, fixed time.
  bool degraded = false;
  // std::uncaught_exceptions() when the Context was made: a larger count in ~Context means it ends
  // while an exception unwinds (this rank ends with an error).
  int uncaught_at_start = 0;

  // Collectives: the world team (made at first use), every team made (their state loses its context
  // pointer when this goes), and per peer how many make_team handshakes we had with it.
  std::shared_ptr<TeamState> world_team;
  std::vector<std::weak_ptr<TeamState>> teams;
  std::vector<uint64_t> team_handshakes;

  ~ContextImpl();

  // Asks the bootstrap (at most every few ms; cheap otherwise) whether a peer died, and marks each
  // new one failed in the core and the transport. Called from every loop that waits.
  void watch();
  void watch_now();
  // "peer 2 failed (its bootstrap connection closed 1.2 s ago)", or "" when `peer` is not known dead.
  std::string failure_text(int peer) const;
  // "peer 2 failed (<how or the transport's text>)", plus the job's first failure when that was
  // another rank (a survivor that left after an error looks dead too). For error paths only.
  std::string peer_failed_text(int peer, const std::string& detail);
  // Whether `peer` is known failed, after giving the store up to 200 ms to say so (error paths only).
  bool learn_failure(int peer);
  // Throws PeerFailed naming a peer failure no wait/test has raised yet; `what` says what was
  // waiting (" while waiting on signal 'x' word 0 for >= 1").
  void raise_new_failure(const std::string& what);
  // The error for a store call that failed inside an rwin call: `text` (who, what; may be empty), then the reason.
  // Where the store's connection broke because its server (rank 0) died, the lease says so within
  // moments, and the error is PeerFailed naming rank 0, as a data-path wait would report it.
  Error store_error(const bootstrap::BootstrapError& e, const std::string& text);

  // Data path helpers.
  uint32_t take_slot(const Slot& s);
  void post_blocking(transport::Work& w, const Slot& s, Deadline& deadline, const char* what);
  void progress();
  // staging.cpp. Collective, at start-up: allocates this rank's staging region and learns every
  // peer's. apply_staged(): called by progress(); adds every slot posted to this rank into its
  // buffers and acknowledges them.
  void start_staging();
  void post_staging_ack(int src);  // staging_target.cpp
  void apply_staged();
  // atomics.cpp: a Fetch slot's completion (progress()). Returns true when the op is finished
  // (its slot may go), false when a 32-bit CAS missed and was queued again in fetch_retry.
  bool fetch_completed(uint32_t slot, const transport::Completion& done);
  void post_fetch_retries();  // after progress()'s completions
  // Fetching atomics not yet completed (to `peer`, or every peer when -1) never write their
  // caller's location: called when a wait for them (quiet, fence, a drain) gives up.
  void detach_fetches(int peer) noexcept;
  std::string fetch_summary(int peer) const;  // " (among them fetch_add_nbi peer 1 of ...)" or ""
  void post_flush(int peer, Deadline& deadline);
  // Returns when everything issued to `peer` so far is complete at the target: drain_start posts its
  // flush (false: nothing to wait for), drain_finish waits for it. quiet starts every peer's before
  // it finishes any, so a quiet costs one round trip, not one per peer in turn.
  bool drain_start(int peer, Deadline& deadline);
  void drain_finish(int peer, Deadline& deadline, const char* what);
  void drain(int peer, Deadline& deadline, const char* what) {
    if (drain_start(peer, deadline)) drain_finish(peer, deadline, what);
  }
  void quiet(std::chrono::milliseconds timeout);
  void barrier(std::chrono::milliseconds timeout);
  // Shutdown of a rank that ends normally: flushes what it sent to every live peer (one that fails
  // meanwhile is skipped), then meets every rank not known failed (Bootstrap::barrier, survivors
  // only). Throws on the deadline or a store error.
  void leave_barrier(std::chrono::milliseconds timeout);
  // Nonblocking collectives (Team::start_*, collectives/nonblocking.cpp): their worker thread, made at
  // the first start, and whether the context is lent to it (a started collective not yet finished).
  // While lent, every call that touches the context's state from another thread is refused
  // (check_owner): a Context is used by one thread at a time, and until then that thread is the worker.
  std::unique_ptr<CollWorker> coll_worker;
  std::atomic<bool> lent{false};
  void check_owner(const char* op) const {
    if (lent.load(std::memory_order_relaxed)) [[unlikely]] owner_check(op);
  }
  void owner_check(const char* op) const;  // returns on the worker thread, else throws InvalidArgument
  // Waits for every started collective and stops the worker (~Context; never throws).
  void stop_coll_worker() noexcept;

  // peer in range and not failed; the message is built out of line (progress.cpp).
  void check_peer(int peer, const char* op) {
    check_owner(op);
    if (peer < 0 || peer >= nranks || !peers[static_cast<size_t>(peer)].failed.empty()) [[unlikely]] {
      peer_check_failed(peer, op);
    }
  }
  [[noreturn, gnu::cold]] void peer_check_failed(int peer, const char* op);
  void abandon(Transfer& t) noexcept;
  std::string outstanding_summary() const;
  // The registered region covering caller memory [p, p + bytes), pinned (RegCache::acquire);
  // throws Error(Transport) naming the range.
  const transport::MemoryRegion* acquire_local(const void* p, uint64_t bytes);
  void release_nbi_pins() noexcept;  // if nothing is outstanding
  std::string who() const { return "rank " + std::to_string(rank); }
};

}  // namespace rwin::detail

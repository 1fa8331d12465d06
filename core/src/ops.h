// Internal functions the core's files share: argument checks, chunk glue, accumulate.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bounds.h"
#include "chunk_planner.h"
#include "context_impl.h"

namespace rwin::detail {

constexpr size_t kScratchWords = 8;  // atomic result slots; word 0 is the sink for notify(Set),
                                     // word 1 the result of an int32 notify's CAS, word 2 the old
                                     // value of a fetching atomic (atomics.cpp)

// How a bootstrap failure reaches the user: a peer that died is PeerFailed, as on the data path.
ErrorCode error_code(const bootstrap::BootstrapError& e);

std::string shape_str(Shape2 s);  // "[4, 1024]"

// A collectively registered buffer (windows.cpp): the job's (alloc_window*, alloc_signals) or a
// team's (members only, `exchange` over the team). WindowMismatch on every member if they differ.
std::shared_ptr<BufferState> create_buffer_among(
    ContextImpl& c, const char* what, const std::string& name, size_t bytes, BufferState::Kind kind, DType dtype,
    Shape2 shape, const std::string& describe, const std::vector<int>& members, const std::string& scope,
    const std::function<std::vector<std::vector<uint8_t>>(const std::vector<uint8_t>&)>& exchange);

// checks.cpp. Each throws Error naming this rank, the operation, the peer and the sizes.
// The checks of every put and get are inline here and branch-light: one predicate per check, and
// only when it fails an out-of-line (cold) function finds which part failed and builds the message.
WindowState& live(const std::shared_ptr<WindowState>& s, const char* what);  // not empty, not freed
[[noreturn, gnu::cold]] void slice_failed(ContextImpl& c, const char* op, int peer, const char* side, const Slice& s);
[[noreturn, gnu::cold]] void pair_failed(ContextImpl& c, const char* op, int peer, const Slice& dst, const Slice& src,
                                         WindowState& d, WindowState& s);

// One side of a put/get: a live window of this context, not a signal array, `peer` a member of
// its team, the slice inside it (no wrap). Returns the window.
inline WindowState& check_slice(ContextImpl& c, const char* op, int peer, const char* side, const Slice& s) {
  WindowState* w = s.window.get();
  if (w && w->ctx() == &c && !w->is_signal && (w->buf->team.empty() || w->buf->rkeys[static_cast<size_t>(peer)]) &&
      slice_in_bounds(s.offsets.data(), s.shape.data(), w->shape.data())) [[likely]] {
    return *w;
  }
  slice_failed(c, op, peer, side, s);
}

inline void check_pair(ContextImpl& c, const char* op, int peer, const Slice& dst, const Slice& src, WindowState& d,
                       WindowState& s) {
  // (std::array == calls memcmp)
  if (dst.shape[0] == src.shape[0] && dst.shape[1] == src.shape[1] && d.dtype == s.dtype) [[likely]] return;
  pair_failed(c, op, peer, dst, src, d, s);
}

// The peer, both slices against their windows, matching shapes and dtypes. Returns {dst, src}.
inline std::pair<WindowState&, WindowState&> check_transfer(ContextImpl& c, const char* op, int peer,
                                                            const Slice& dst, const Slice& src) {
  c.check_peer(peer, op);
  WindowState& d = check_slice(c, op, peer, "dst", dst);
  WindowState& s = check_slice(c, op, peer, "src", src);
  check_pair(c, op, peer, dst, src, d, s);
  return {d, s};
}
// Signal elements after their checks: a rectangle of int32 or int64 elements of one view.
struct SignalTarget {
  const WindowState* w = nullptr;
  size_t width = 8;  // bytes per element: 4 or 8
  Shape2 offsets{0, 0};
  Shape2 shape{1, 1};
  int64_t elements() const noexcept { return shape[0] * shape[1]; }
  // Byte offset of element (i, j) of the rectangle from the view's element [0, 0].
  uint64_t byte_at(int64_t i, int64_t j) const noexcept {
    return static_cast<uint64_t>((offsets[0] + i) * w->shape[1] + offsets[1] + j) * width;
  }
};
// Plain local memory as one side of a put/get: its checks against the window slice it pairs with.
// Returns the bytes it spans from `data` (0 when empty).
uint64_t check_local(ContextImpl& c, const char* op, int peer, const char* side, const Local& l, const Slice& other,
                     const WindowState& w);

// `peer` < 0: a local operation (wait, test).
SignalTarget check_signal(ContextImpl& c, const char* op, int peer, const SignalSlice& sig);
SignalTarget check_signal(ContextImpl& c, const char* op, int peer, const Slice& sig);
// The same for a fetching atomic (atomics.cpp): one int32/int64/uint32/uint64 element.
SignalTarget check_atomic_target(ContextImpl& c, const char* op, int peer, const Slice& target);

// One put/get-style transfer after its checks: a rectangle of `shape` elements of `esz` bytes
// between a local 2-D array and the same-shaped rectangle of the peer's window. Row lengths
// (`cols`) are in elements; `base` is element [0, 0] of each array.
struct Xfer {
  int peer = -1;
  DType dtype = DType::I64;
  size_t esz = 0;
  Shape2 shape{0, 0};
  char* local_base = nullptr;
  const transport::MemoryRegion* local_mr = nullptr;
  int64_t local_cols = 0;
  Shape2 local_offsets{0, 0};
  uint64_t remote_base = 0;
  const transport::RemoteKey* rkey = nullptr;
  int64_t remote_cols = 0;
  Shape2 remote_offsets{0, 0};
};
// Plain pointers only: a posted transfer keeps no Slice's or WindowState's shared_ptr past the call, which
// the collectives' ByteView (a view whose shared_ptrs own nothing, collectives/team_state.h) relies on.
static_assert(std::is_trivially_copyable_v<Xfer>);
// `local` is this rank's side (put: src, get: dst), `remote` the peer's.
Xfer make_xfer(int peer, const WindowState& local, const Slice& local_slice, const WindowState& remote,
               const Slice& remote_slice);

// The same with plain local memory (registered as `mr`, or null where the transport needs none).
Xfer make_xfer(int peer, const Local& local, const transport::MemoryRegion* mr, const WindowState& remote,
               const Slice& remote_slice);

// transfer.cpp: the chunk planner over a transfer (max_chunk 0: the configured chunk size), and the
// work request that moves one chunk.
ChunkPlanner plan_chunks(const ContextImpl& c, const Xfer& x, uint64_t max_chunk);
transport::Work chunk_work(transport::Op op, const Xfer& x, const Chunk& ch);

// A blocking put/get (Op::Write / Op::Read; Op::Accumulate for put(Add) the target applies itself):
// the rectangle in chunks of at most `max_chunk` bytes (0: the configured chunk size), at most
// pipeline_depth in flight; returns when every chunk completed. Throws PeerFailed / Timeout.
void run_transfer(ContextImpl& c, transport::Op op, const Xfer& x, const char* what, uint64_t max_chunk = 0);

// One blocking op without the slot table: posts `w` and polls until its own completion arrives
// (the cookie kSyncBit | peer << 32 | sequence routes it). Throws PeerFailed / Timeout.
void run_single(ContextImpl& c, transport::Work& w, const char* what);
// The same under a caller's deadline (a loop of single ops, e.g. a CAS retry loop, bounded as a whole).
void run_single(ContextImpl& c, transport::Work& w, const char* what, Deadline& deadline);

// accumulate.cpp: put(atomic = Add) into `dst` (the peer's copy of it), `x.local` the source.
void run_accumulate(ContextImpl& c, const Xfer& x, const WindowState& dst);
// accumulate.cpp: what a transport that applies put(Add) itself (Capabilities::max_add_bytes) runs
// for a buffer of `bytes` user bytes at `base` (its stripe locks after them, stripe_locks.h), named
// `name` in its refusals.
std::shared_ptr<const transport::RegionAdder> make_region_adder(const ContextImpl& c, char* base, uint64_t bytes,
                                                                std::string name);

// How add_locked waits for a stripe lock another rank holds.
struct LockWait {
  // true: inside progress() (the target applying staged slots): no progress() while waiting (no
  // recursion), and the lock of a holder known to have failed is broken (the stripe then holds
  // whatever that holder left: memory a failed peer wrote into is undefined anyway). false: a
  // put(Add) caller: it progresses while it waits, and a failed holder is PeerFailed.
  bool in_progress = false;
  const BufferState* buf = nullptr;  // for messages
  int target = -1;                   // whose buffer (a peer's mapped here), -1: this rank's
  Deadline* deadline = nullptr;      // null: a deadline of its own (op_timeout)
  const std::string* what = nullptr; // "put(Add) to peer 1 into 'x' f32[...]" (the caller's side)
};

// dst[i] += src[i] over `bytes` of elements of `t` at byte `off` of a buffer of `buf_bytes` user
// bytes whose byte 0 is at `base` in this process (this rank's memory or a peer's mapped here),
// holding the lock of each stripe while adding into it (stripe_locks.h). Holds no lock while it
// waits or calls anything but the element loop. Throws PeerFailed / Timeout (see LockWait).
void add_locked(ContextImpl& c, char* base, uint64_t buf_bytes, uint64_t off, const char* src, uint64_t bytes, DType t,
                const LockWait& lw);

}  // namespace rwin::detail

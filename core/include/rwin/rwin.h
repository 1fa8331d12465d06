// rwin: one-sided, window-based communication between ranks.
//
// The names mirror the tile runtime's `pld` module: windows hold a typed 2-D tensor on every
// rank; put/get move slices of them; notify/wait synchronise through 64-bit signal words.
// The promises each call makes are in docs/CONTRACT.md.
//
// Thread safety: a Context and everything allocated from it are used by one thread at a time,
// with one exception: Context::fail_peer may be called from any thread at any time (a runtime's
// health lane), also while the owning thread is blocked in a wait. Handles (Window, SignalArray,
// Slice, SignalSlice) are cheap values that share state. Contexts are independent of each other.
// fork(): a child may make a Context of its own only if none was open when it forked.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>
#include "rwin/store.h"
#include "rwin/version.h"

namespace rwin {

// ---------------------------------------------------------------------------------------------
// Errors

enum class ErrorCode {
  InvalidArgument,  // a bad option or argument not covered below
  PeerOutOfRange,   // peer < 0 or >= size()
  OutOfBounds,      // a slice reaches outside its window / signal array
  ShapeMismatch,    // src and dst shapes differ
  DtypeMismatch,    // src and dst dtypes differ, or an unsupported dtype for the operation
  Misaligned,       // a view or signal word not aligned as its element type needs
  WindowMismatch,   // a collective window whose size/dtype/shape differs across ranks
  UseAfterFree,     // a freed buffer, window (view) or signal array
  Timeout,          // a deadline passed
  PeerFailed,       // the transport to that peer failed; sticky
  Transport,        // set-up of the transport failed
  Bootstrap,        // rendezvous failed
  Unsupported,      // valid request this build/transport cannot do
  CollectiveMismatch,  // members of a collective call disagree (size, dtype, root, op, team)
};
const char* to_string(ErrorCode code) noexcept;  // the code's name: "OutOfBounds"

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// ---------------------------------------------------------------------------------------------
// Element types and operation enums (pld.AtomicType, pld.NotifyOp, pld.WaitCmp)

// The numeric codes travel in window descriptors (core/src/window_blob.cpp): existing values never
// change, new types are appended. docs/CONTRACT.md has the table of sizes and put(Add) semantics.
enum class DType : uint8_t { I32, I64, U32, U64, F32, F64, F16, BF16, I8, I16, U8, U16 };
inline constexpr std::array<DType, 12> all_dtypes = {DType::I32, DType::I64, DType::U32, DType::U64,
                                                     DType::F32, DType::F64, DType::F16, DType::BF16,
                                                     DType::I8,  DType::I16, DType::U8,  DType::U16};
constexpr size_t dtype_size(DType t) noexcept {  // 0 for a value outside the enum
  switch (t) {
    case DType::I8: case DType::U8: return 1;
    case DType::I16: case DType::U16: case DType::F16: case DType::BF16: return 2;
    case DType::I32: case DType::U32: case DType::F32: return 4;
    case DType::I64: case DType::U64: case DType::F64: return 8;
  }
  return 0;
}       // 0 for a value that is not a DType
const char* dtype_name(DType t) noexcept;  // "i32", "f64", "bf16", ...
DType parse_dtype(const std::string& name);  // throws Error(InvalidArgument) listing every name

// IEEE 754 binary16 and bfloat16 elements, held as their bits (no arithmetic here: convert with
// to_float, compute in float, convert back).
struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};
// Exact (every f16/bf16 value is a float). NaN stays NaN (payload kept), infinities stay.
float to_float(f16 h) noexcept;
float to_float(bf16 h) noexcept;
// Round to nearest, ties to even. Overflow becomes an infinity of the same sign, values below
// half the smallest subnormal become a zero of the same sign, NaN stays NaN (made quiet; the top
// payload bits are kept).
f16 to_f16(float x) noexcept;
bf16 to_bf16(float x) noexcept;

template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<uint32_t>() { return DType::U32; }
template <> constexpr DType dtype_of<uint64_t>() { return DType::U64; }
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<f16>() { return DType::F16; }
template <> constexpr DType dtype_of<bf16>() { return DType::BF16; }
template <> constexpr DType dtype_of<int8_t>() { return DType::I8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::I16; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::U16; }

enum class AtomicType { None, Add };
enum class NotifyOp { AtomicAdd, Set };
enum class WaitCmp { EQ, NE, GT, GE, LT, LE };
const char* to_string(WaitCmp cmp) noexcept;  // "==", "!=", ">", ">=", "<", "<="

constexpr bool compare(int64_t value, WaitCmp cmp, int64_t expected) noexcept {
  switch (cmp) {
    case WaitCmp::EQ: return value == expected;
    case WaitCmp::NE: return value != expected;
    case WaitCmp::GT: return value > expected;
    case WaitCmp::GE: return value >= expected;
    case WaitCmp::LT: return value < expected;
    case WaitCmp::LE: return value <= expected;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Options. Every RWIN_* variable is read in one place (Options::from_env); docs/CONFIG.md lists
// them with their defaults. Fields set in code win over the environment.

struct Options {
  int rank = -1;           // -1: from the launcher's environment
  int nranks = -1;         // -1: from the launcher's environment
  std::string root;        // "host:port" of the bootstrap store (rank 0 serves it)
  std::string transport;   // "auto" | "ucx" | "tcp" | "mixed" | "verbs"; empty: RWIN_TRANSPORT, else "auto"
  std::string ib_device;   // verbs device; empty: RWIN_IB_DEVICE, else the first usable one
  int ib_port = 1;         // verbs port (RWIN_IB_PORT)
  int gid_index = -1;      // verbs GID index; -1: auto (RWIN_GID_INDEX)
  std::string ucx_rma;     // ucx: "auto" | "native" | "am"; empty: RWIN_UCX_RMA, else "auto" (docs/CONFIG.md)
  int ucx_tcp_zcopy = -1;  // ucx without RDMA devices: 1 = let UCX use zero-copy tcp sends (faster, but
                           // UCX 1.13 can crash a survivor when a peer dies mid-send); 0 = copy (default);
                           // -1: RWIN_UCX_TCP_ZCOPY, else 0
  size_t chunk_bytes = 0;  // 0: RWIN_CHUNK_BYTES, else the transport's measured default (docs/CONFIG.md)
  int pipeline_depth = 0;  // chunks in flight per transfer; 0: RWIN_PIPELINE_DEPTH, else the transport's
  size_t accumulate_staging_bytes = 0;  // put(Add) staging inbox per rank; 0: RWIN_ACCUMULATE_STAGING_BYTES,
                                        // else 4 MiB (docs/CONFIG.md)
  std::chrono::milliseconds startup_timeout{0};  // 0: RWIN_STARTUP_TIMEOUT_MS, else 60 s
  std::chrono::milliseconds op_timeout{0};       // default deadline of blocking ops (RWIN_TIMEOUT_MS, else 60 s)
  int spin_us = -1;  // waits spin this long before yielding; -1: RWIN_SPIN_US, else 200, or 0 when the job's
                     // ranks on this host outnumber its CPUs (process-wide; docs/CONFIG.md)
  std::string job_key;  // the job's secret for the bootstrap store; empty: RWIN_JOB_KEY, else none (loopback only)
  std::string bootstrap;  // "auto" | "tcp" | "pmix"; empty: RWIN_BOOTSTRAP, else auto (docs/CONFIG.md). from_env
                          // resolves auto; under "pmix" it leaves rank, nranks, root and job_key to the
                          // Context, which takes them from the launcher's PMIx server

  // Fills every unset field from the environment and defaults. Throws Error(InvalidArgument)
  // naming the variable for a value that does not parse.
  static Options from_env(Options base);
  static Options from_env();
};

// ---------------------------------------------------------------------------------------------
// Windows, slices, signals

using Shape2 = std::array<int64_t, 2>;

namespace detail {
struct BufferState;
struct WindowState;
struct ContextImpl;
struct ContextAccess;  // the collectives' way in (core/src/collectives)
}  // namespace detail

class Window;

// A collectively allocated buffer of N bytes on every rank (Context::alloc_window_buffer): the
// memory typed views (Context::window) are made of, as the runtime's window buffers are.
class WindowBuffer {
 public:
  WindowBuffer() = default;
  const std::string& name() const;
  size_t bytes() const;
  bool valid() const noexcept;  // false after Context::free
  void* data() const;           // this rank's copy (page aligned, zeroed at allocation)

 private:
  friend class Context;
  friend class Window;
  friend struct detail::ContextAccess;
  explicit WindowBuffer(std::shared_ptr<detail::BufferState> s) : s_(std::move(s)) {}
  std::shared_ptr<detail::BufferState> s_;
};

// A sub-rectangle `offsets + shape` of a window (row-major). As a put/get `dst`/`src` on the
// remote side it names the peer's copy of the same window at the same offsets. A slice with no
// elements (a zero in its shape) is a no-op in put, get, wait and test, once every other check
// passed (docs/CONTRACT.md).
struct Slice {
  std::shared_ptr<detail::WindowState> window;
  Shape2 offsets{0, 0};
  Shape2 shape{0, 0};
  int64_t elements() const noexcept { return shape[0] * shape[1]; }
};

// A run of `count` 64-bit signal words starting `byte_offset` bytes into a signal array.
struct SignalSlice {
  std::shared_ptr<detail::WindowState> signals;
  uint64_t byte_offset = 0;
  int64_t count = 1;
};

// A typed 2-D view of a window buffer: made by alloc_window (with a buffer of its own) or by
// Context::window (any number of views per buffer, overlapping allowed). Every rank is expected to
// make the same views: the remote side of an operation is the peer's buffer at the same offset.
class Window {
 public:
  Window() = default;
  const std::string& name() const;  // the buffer's name
  DType dtype() const;
  Shape2 shape() const;
  size_t bytes() const;
  uint64_t byte_offset() const;  // where element [0, 0] lies in the buffer
  WindowBuffer buffer() const;   // the buffer this is a view of
  bool valid() const noexcept;   // false after its buffer was freed

  // This rank's copy, row-major with row stride shape()[1]. Throws on dtype mismatch.
  void* data() const;
  template <class T>
  T* data_as() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(data());
  }

  // Bounds are checked when the slice is used; a freed window throws UseAfterFree here already.
  Slice slice(Shape2 offsets, Shape2 shape) const;
  Slice all() const;

 private:
  friend class Context;
  friend struct detail::ContextAccess;
  explicit Window(std::shared_ptr<detail::WindowState> s) : s_(std::move(s)) {}
  void check_dtype(DType t) const;
  std::shared_ptr<detail::WindowState> s_;
};

// Caller memory that is not a window, as the local side of a put (src) or a get (dst): `dtype[shape]`
// row-major with `row_stride` elements from one row to the next (0: shape[1], i.e. contiguous). Heap,
// stack, mmap: any memory the process can read (put) or write (get). rwin registers it with the
// transport on demand through a registration cache (docs/CONTRACT.md "Plain local memory").
struct Local {
  void* data = nullptr;
  DType dtype = DType::F32;
  Shape2 shape{0, 0};
  int64_t row_stride = 0;
  int64_t elements() const noexcept { return shape[0] * shape[1]; }
};
template <class T>
Local local(T* data, Shape2 shape, int64_t row_stride = 0) {
  return Local{const_cast<void*>(static_cast<const void*>(data)), dtype_of<std::remove_const_t<T>>(), shape,
               row_stride};
}

// 64-bit signed signal words in their own registered region (8-byte aligned).
class SignalArray {
 public:
  SignalArray() = default;
  const std::string& name() const;
  int64_t size() const;
  bool valid() const noexcept;

  int64_t load(int64_t index) const;            // atomic read of this rank's word
  void store(int64_t index, int64_t value);     // atomic local write (e.g. reset between rounds)

  SignalSlice at(int64_t index) const;                     // one word
  SignalSlice slice(int64_t first, int64_t count) const;   // `count` words
  // Address-style: a word at a byte offset, as a runtime lowering signal addresses produces.
  // A byte offset that is not a multiple of 8 is rejected (Misaligned) when it is used.
  SignalSlice at_byte(uint64_t byte_offset) const;

 private:
  friend class Context;
  explicit SignalArray(std::shared_ptr<detail::WindowState> s) : s_(std::move(s)) {}
  std::shared_ptr<detail::WindowState> s_;
};

// ---------------------------------------------------------------------------------------------
// Context: one per rank per job.

// What a context did (Context::stats(), docs/OBSERVING.md): cheap counters, always on. Data movement is
// counted where it happens, so a collective's puts, gets and notifies count too; quiet, fence and
// barrier count the caller's calls.
struct PeerStats {
  uint64_t puts = 0, put_bytes = 0;          // put / put_nbi of data (atomic None), non-empty
  uint64_t put_adds = 0, put_add_bytes = 0;  // put(Add)
  uint64_t gets = 0, get_bytes = 0;          // get / get_nbi, non-empty
  uint64_t chunks = 0;     // transport work requests puts and gets were cut into (0: CPU copies, mapped memory)
  uint64_t notifies = 0;   // notify (AtomicAdd or Set)
  uint64_t fetching_atomics = 0;  // fetch_add, compare_swap, swap, atomic_fetch, blocking and nbi
  uint64_t fences = 0;     // fence(peer) calls
};
struct Stats {
  std::vector<PeerStats> peers;  // index = peer (this rank included)
  PeerStats total;               // the sum over peers
  uint64_t waits = 0;            // wait() calls
  uint64_t waits_blocked = 0;    // of them, not satisfied at the first look
  uint64_t wait_ns = 0;          // time spent in those (from the first unsatisfied look to the return)
  uint64_t tests = 0, tests_satisfied = 0;  // test() calls, and those that returned true
  uint64_t quiets = 0, barriers = 0;        // the caller's quiet() and barrier() calls
  uint64_t failed_peers = 0;                // ranks known failed
  uint64_t reg_cache_hits = 0, reg_cache_misses = 0;  // plain-memory registrations (verbs)
  // The transport's work (verbs; zero elsewhere): work requests, doorbells, signaled and inline work
  // requests, completions polled, work drained from failed peers, striped work, ordering reads.
  uint64_t wrs = 0, doorbells = 0, signaled = 0, inline_wrs = 0, cqes = 0, drained = 0, striped = 0, fence_reads = 0;
};

class Context {
 public:
  // Collective start-up: rendezvous, transport connect. Deadline: Options::startup_timeout; a
  // rank that never arrives makes every other rank throw Error(Timeout) naming it (Error(Bootstrap):
  // the rendezvous itself failed, e.g. the root refused or a job key did not match).
  explicit Context(const Options& options = Options());
  // Collective start-up on a store the caller brings (rwin/store.h, docs/EMBEDDING.md): this rank is
  // `rank` of `nranks`. No store server, no listening port of the bootstrap's own, no lease
  // connection; RWIN_ROOT, RWIN_BOOTSTRAP and the launchers' variables are not read (the other
  // RWIN_* knobs and `options` still are; options.rank/nranks, if set, must agree and options.root
  // must be empty, else Error(InvalidArgument)). A dead peer is then found by the transport when an
  // operation to it fails, or told by the caller through fail_peer.
  Context(std::shared_ptr<Store> store, int rank, int nranks, const Options& options = Options());
  // Best effort: quiet and a bounded barrier, then release every resource. Never throws.
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const noexcept;
  int size() const noexcept;
  std::string transport_name() const;
  // How RMA reaches `peer` (0 <= peer < size(), else Error(InvalidArgument)): "direct" (shared
  // memory mapped here), "am" (rwin's ordered active-message protocol, UCX over tcp) or "native"
  // (UCX's RMA, RDMA verbs). docs/CONFIG.md, RWIN_UCX_RMA.
  std::string rma_mode(int peer) const;
  const Options& options() const noexcept;

  // Collective: the same name, dtype and shape on every rank (else Error(WindowMismatch) on
  // every rank, naming the sizes seen). Memory is zeroed.
  Window alloc_window(const std::string& name, DType dtype, Shape2 shape);
  // Collective: `count` signal words, zero-initialised.
  SignalArray alloc_signals(const std::string& name, int64_t count);
  // Collective: `bytes` on every rank (else Error(WindowMismatch) on every rank naming the sizes),
  // page aligned and zeroed, for typed views made with window().
  WindowBuffer alloc_window_buffer(const std::string& name, size_t bytes);
  // Local (not collective): a view of `buffer` holding `dtype[shape]` row-major from `byte_offset`.
  // Checked here: the buffer is live and of this context, shape positive, the view inside the
  // buffer (OutOfBounds), `byte_offset` a multiple of the element size (Misaligned; that is all the
  // atomics need too: put(Add) and int32 signals update the aligned 8-byte word holding an element).
  Window window(const WindowBuffer& buffer, DType dtype, Shape2 shape, uint64_t byte_offset = 0);
  // Collective: quiet, barrier, deregister. Later use of the handle, and of every view of a freed
  // buffer, throws UseAfterFree. free(Window) frees a window made by alloc_window; a view made by
  // window() is freed with its buffer.
  void free(Window& window);
  void free(SignalArray& signals);
  void free(WindowBuffer& buffer);

  // Copies local `src` into `peer`'s `dst`. Returns when `src` may be reused; remote visibility
  // comes with a later notify to the same peer, quiet() or barrier().
  void put(const Slice& dst, int peer, const Slice& src, AtomicType atomic = AtomicType::None);
  // Copies `peer`'s `src` into local `dst`. Returns when the data is in `dst`.
  void get(const Slice& dst, int peer, const Slice& src);
  // Non-blocking forms: return once every chunk is posted. `src` (put) must not change, and `dst`
  // (get) holds the data, only after quiet() or fence(peer). A notify to the same peer is still
  // ordered after an earlier put_nbi. Failures surface at the next operation on that peer.
  void put_nbi(const Slice& dst, int peer, const Slice& src);
  void get_nbi(const Slice& dst, int peer, const Slice& src);
  // The same with plain local memory as the local side. The memory must stay mapped (and, for a
  // put_nbi, unchanged; for a get_nbi, unread) until the operation completed.
  void put(const Slice& dst, int peer, const Local& src, AtomicType atomic = AtomicType::None);
  void get(const Local& dst, int peer, const Slice& src);
  void put_nbi(const Slice& dst, int peer, const Local& src);
  void get_nbi(const Local& dst, int peer, const Slice& src);
  // Drops every cached registration of plain local memory containing `ptr` (no-op if none). Not
  // required for correctness (unmapped memory is noticed by itself, docs/CONTRACT.md); it releases
  // pinned pages early. Must not be called while an operation on that memory is in flight.
  void deregister(const void* ptr);
  // Updates `peer`'s signal word. Ordered after every earlier put to that peer: when the peer
  // sees the effect, those puts are visible in its memory.
  void notify(const SignalSlice& signal, int peer, int64_t value, NotifyOp op = NotifyOp::AtomicAdd);
  // Signals as windows, as the runtime has them: element `offsets` of an int32 or int64 window
  // (or a slice of exactly one element). Same ordering promise. An int32 element is updated
  // atomically without touching its neighbour in the 8-byte word: AtomicAdd on the word's upper
  // half is one remote fetch-free add; otherwise a compare-and-swap loop on the word, which waits
  // for the round trip (docs/CONTRACT.md).
  void notify(const Window& signal, int peer, Shape2 offsets, int64_t value, NotifyOp op = NotifyOp::AtomicAdd);
  void notify(const Slice& signal, int peer, int64_t value, NotifyOp op = NotifyOp::AtomicAdd);
  // Fetching atomics on one element of `peer`'s copy of a window (a slice of exactly one element
  // of an int32, int64, uint32 or uint64 window; a signal array's word with the SignalSlice forms).
  // Blocking: each returns the element's value just before the operation, as the element's type
  // holds it (int32 sign-extended, uint32 zero-extended, uint64 as its bits). Atomic against every
  // other fetching atomic and notify on the element from any rank (not against plain puts or
  // put(Add) into it: docs/CONTRACT.md),
  // and ordered after every earlier put to that peer, as notify is. Values outside the element's
  // type are InvalidArgument. fetch_add wraps like the type; atomic_fetch reads without changing.
  // int32/uint32 elements: a compare-and-swap loop on their 8-byte word (one round trip per try).
  int64_t fetch_add(const Slice& target, int peer, int64_t value);
  int64_t compare_swap(const Slice& target, int peer, int64_t expected, int64_t desired);
  int64_t swap(const Slice& target, int peer, int64_t value);
  int64_t atomic_fetch(const Slice& target, int peer);
  int64_t fetch_add(const SignalSlice& target, int peer, int64_t value);
  int64_t compare_swap(const SignalSlice& target, int peer, int64_t expected, int64_t desired);
  int64_t swap(const SignalSlice& target, int peer, int64_t value);
  int64_t atomic_fetch(const SignalSlice& target, int peer);
  // Non-blocking forms (OpenSHMEM's shmem_atomic_*_nbi): the same operation, its old value (widened
  // as above) written to `*fetch` by the time quiet(), barrier() or fence(peer) returns; before that
  // `*fetch` is unspecified and must stay valid. Many may be in flight to many peers at once, each
  // with its own result. Ordered after earlier puts to `peer` as the blocking form; not ordered
  // with each other or with later operations unless fence(peer)/quiet() comes between. A refused
  // call (null `fetch`, wrong dtype or value, out of bounds, freed window, bad peer) throws before
  // anything is posted. If the op fails, the quiet/fence that would complete it throws and `*fetch`
  // is never written (whether the op took effect at the peer is then unknown). int32/uint32
  // elements: the CAS loop runs from progress (every rwin call, quiet and wait drive it).
  void fetch_add_nbi(int64_t* fetch, const Slice& target, int peer, int64_t value);
  void compare_swap_nbi(int64_t* fetch, const Slice& target, int peer, int64_t expected, int64_t desired);
  void swap_nbi(int64_t* fetch, const Slice& target, int peer, int64_t value);
  void atomic_fetch_nbi(int64_t* fetch, const Slice& target, int peer);
  void fetch_add_nbi(int64_t* fetch, const SignalSlice& target, int peer, int64_t value);
  void compare_swap_nbi(int64_t* fetch, const SignalSlice& target, int peer, int64_t expected, int64_t desired);
  void swap_nbi(int64_t* fetch, const SignalSlice& target, int peer, int64_t value);
  void atomic_fetch_nbi(int64_t* fetch, const SignalSlice& target, int peer);
  // Blocks until every word of the local `signal` satisfies `cmp` against `expected`, driving
  // transport progress meanwhile. Deadline: `timeout`, else Options::op_timeout; a negative
  // timeout is InvalidArgument.
  void wait(const SignalSlice& signal, int64_t expected, WaitCmp cmp = WaitCmp::GE,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Non-blocking form of wait (drives progress once).
  bool test(const SignalSlice& signal, int64_t expected, WaitCmp cmp = WaitCmp::GE);
  // wait/test on an int32 or int64 window: one element, or every element of a slice.
  void wait(const Window& signal, Shape2 offsets, int64_t expected, WaitCmp cmp = WaitCmp::GE,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  void wait(const Slice& signals, int64_t expected, WaitCmp cmp = WaitCmp::GE,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  bool test(const Window& signal, Shape2 offsets, int64_t expected, WaitCmp cmp = WaitCmp::GE);
  bool test(const Slice& signals, int64_t expected, WaitCmp cmp = WaitCmp::GE);

  // The caller learned that `peer` is gone (its own heartbeat, a process monitor): from now on every
  // operation to `peer` throws Error(PeerFailed) naming it and `reason`, a wait or test in progress
  // or to come raises it once (as for a failure rwin found itself), collectives that need `peer`
  // end with PeerFailed, and shutdown does not wait for it. Thread-safe: callable from any thread
  // while the owning thread is inside any call (it is seen there within a few milliseconds); never
  // blocks. `peer` must be another rank of the job (else Error(InvalidArgument), thrown here).
  // A rank already known failed keeps its first reason.
  void fail_peer(int peer, const std::string& reason);

  // The counters so far (Stats). Owning thread. With RWIN_STATS=1 the destructor also prints them to
  // stderr as one JSON line ("rwin-stats {...}").
  Stats stats() const;

  void fence(int peer);  // later ops to `peer` are delivered after earlier ones
  void quiet();          // every op this rank issued is complete at its target
  void barrier();        // all ranks arrive; implies quiet()

  // Collective: every rank contributes a small blob, every rank receives all of them in rank
  // order (through the bootstrap, not the data path). For exchanging metadata such as a
  // benchmark's own transport addresses.
  std::vector<std::vector<uint8_t>> allgather(const std::vector<uint8_t>& mine);

 private:
  friend struct detail::ContextAccess;
  std::unique_ptr<detail::ContextImpl> impl_;
};

}  // namespace rwin

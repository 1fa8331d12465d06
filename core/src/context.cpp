// rwin::Context: windows, the put/get pipeline, ordered notify, progress-driving waits.
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>

#include "bootstrap/netif.h"
#include "chunk_planner.h"
#include "bounds.h"
#include "context_impl.h"
#include "window_blob.h"

namespace rwin {

using Clock = std::chrono::steady_clock;
using detail::ContextImpl;
using detail::Backoff;
using detail::Deadline;
using detail::PeerState;
using detail::Slot;
using detail::Transfer;
using detail::WindowState;
using transport::Op;
using transport::PostResult;
using transport::Work;

namespace {

constexpr size_t kScratchWords = 8192;          // atomic result slots (64 KiB); word 0 is the
                                                // sink for notify(Set), the rest serve put(Add)
constexpr int kAtomicsInFlight = 256;           // element atomics of one put(Add) in flight

// How a bootstrap failure reaches the user: a peer that died is PeerFailed, as on the data path.
ErrorCode error_code(const bootstrap::BootstrapError& e) {
  switch (e.kind()) {
    case bootstrap::BootstrapError::Kind::Timeout:
      return ErrorCode::Timeout;
    case bootstrap::BootstrapError::Kind::PeerFailed:
      return ErrorCode::PeerFailed;
    default:
      return ErrorCode::Bootstrap;
  }
}

std::string shape_str(Shape2 s) { return "[" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + "]"; }

int64_t load_word(const WindowState& s, uint64_t byte_offset) {
  auto* p = reinterpret_cast<int64_t*>(static_cast<char*>(s.base()) + byte_offset);
  return std::atomic_ref<int64_t>(*p).load(std::memory_order_acquire);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// WindowState

std::string WindowState::describe() const {
  return "'" + name + "' " + dtype_name(dtype) + "[" + std::to_string(shape[0]) + "x" + std::to_string(shape[1]) +
         "] (" + std::to_string(bytes) + " bytes)";
}

void WindowState::release() noexcept {
  rkeys.clear();
  mr.reset();
  ctx = nullptr;
}

// ---------------------------------------------------------------------------------------------
// ContextImpl: data path

ContextImpl::~ContextImpl() {
  // First make sure nothing can write into our memory any more (a dead or late peer's data
  // still in a socket, a rendezvous receive, a queue pair), then release it.
  // Remote keys belong to the transport's worker: they go while it still exists.
  for (auto& w : windows) w->rkeys.clear();
  if (tp) tp->quiesce(!degraded);
  for (auto& w : windows) w->release();
  windows.clear();
  graveyard.clear();
  scratch.reset();
}

// ---------------------------------------------------------------------------------------------
// ContextImpl: peer liveness

void ContextImpl::watch() {
  // Two clock reads per call at most; the bootstrap is asked every 2 ms (one non-blocking recv).
  const auto now = Clock::now();
  if (now < next_watch) return;
  next_watch = now + std::chrono::milliseconds(2);
  watch_now();
}

void ContextImpl::watch_now() {
  if (!bs) return;
  for (auto& f : bs->poll_failures()) {
    if (f.rank < 0 || f.rank >= nranks || f.rank == rank) continue;
    known_failures.push_back(KnownFailure{f.rank, f.how, f.when});
    degraded = true;
    const std::string text = "peer " + std::to_string(f.rank) + " failed (" + f.how + ")";
    if (static_cast<size_t>(f.rank) < peers.size()) {
      PeerState& ps = peers[static_cast<size_t>(f.rank)];
      if (ps.failed.empty()) ps.failed = text;
    }
    if (tp) tp->fail_peer(f.rank, text);
  }
}

std::string ContextImpl::failure_text(int peer) const {
  for (const auto& f : known_failures) {
    if (f.rank != peer) continue;
    const double ago = std::chrono::duration<double>(Clock::now() - f.when).count();
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", ago);
    return "peer " + std::to_string(peer) + " failed (" + f.how + ", learned " + secs + " s ago)";
  }
  return {};
}

std::string ContextImpl::peer_failed_text(int peer, const std::string& detail) {
  // An error path: the transport may see a peer's death (or its abandoning the job) a moment before
  // the store's news arrives; give the lease a moment, so the message names what really happened.
  watch_now();
  for (int i = 0; i < 200 && failure_text(peer).empty() && bs; ++i) {
    timespec ts{0, 1000 * 1000};
    nanosleep(&ts, nullptr);
    watch_now();
  }
  std::string s = failure_text(peer);
  if (s.empty()) {
    const std::string head = "peer " + std::to_string(peer) + " failed";
    s = detail.rfind(head, 0) == 0 ? detail : head + " (" + detail + ")";
  }
  // A survivor that left after an error looks dead too: name the failure that started it.
  if (!known_failures.empty() && known_failures.front().rank != peer) {
    s += "; first failure in the job: " + failure_text(known_failures.front().rank);
  }
  return s;
}

void ContextImpl::raise_new_failure(const std::string& what) {
  if (failures_reported >= known_failures.size()) return;
  const KnownFailure& f = known_failures[failures_reported];
  failures_reported = known_failures.size();  // a wait reports each failure once (as ULFM does)
  throw Error(ErrorCode::PeerFailed, who() + ": " + failure_text(f.rank) + what);
}

uint32_t ContextImpl::take_slot(const Slot& s) {
  uint32_t id;
  if (free_slots.empty()) {
    id = static_cast<uint32_t>(slots.size());
    slots.push_back(s);
  } else {
    id = free_slots.back();
    free_slots.pop_back();
    slots[id] = s;
  }
  return id;
}

void ContextImpl::check_peer(int peer, const char* op) {
  if (peer < 0 || peer >= nranks) {
    throw Error(ErrorCode::PeerOutOfRange, who() + ": " + op + " to peer " + std::to_string(peer) +
                                               ": peer out of range (job has ranks 0.." +
                                               std::to_string(nranks - 1) + ")");
  }
  const PeerState& p = peers[static_cast<size_t>(peer)];
  if (!p.failed.empty()) {
    throw Error(ErrorCode::PeerFailed, who() + ": " + op + " to peer " + std::to_string(peer) +
                                           ": " + peer_failed_text(peer, p.failed));
  }
  // A failure the transport saw without a completion (e.g. an endpoint error) is reported by its
  // post(), as PeerFailed with the transport's message: no need to ask on every call.
}

// Posts one work request, polling while the transport is full. Throws on deadline or failure.
void ContextImpl::post_blocking(Work& w, const Slot& s, Deadline& deadline, const char* what) {
  const uint32_t id = take_slot(s);
  w.cookie = id;
  Backoff backoff;
  for (;;) {
    const PostResult r = tp->post(w);
    if (r == PostResult::Ok) return;
    if (r == PostResult::PeerFailed) {
      free_slots.push_back(id);
      std::string err = tp->peer_error(w.peer);
      peers[static_cast<size_t>(w.peer)].failed = err;
      throw Error(ErrorCode::PeerFailed, who() + ": " + what + " to peer " + std::to_string(w.peer) + ": " +
                                             peer_failed_text(w.peer, err));
    }
    progress();
    watch();  // a dead peer's post() then returns PeerFailed
    if (deadline.passed()) {
      free_slots.push_back(id);
      degraded = true;
      throw Error(ErrorCode::Timeout, who() + ": " + what + " to peer " + std::to_string(w.peer) +
                                          ": transport stayed busy until the deadline (" + tp->describe() + ")");
    }
    backoff.idle();
  }
}

void ContextImpl::progress() {
  completions.clear();
  tp->poll(completions);
  for (auto& c : completions) {
    if (c.cookie & kSyncBit) {
      const int p = static_cast<int>((c.cookie >> 32) & 0x7fffffff);
      if (!c.ok && peers[static_cast<size_t>(p)].failed.empty()) peers[static_cast<size_t>(p)].failed = c.error;
      if (c.cookie == sync_cookie) {
        sync_done = true;
        if (!c.ok) sync_error = std::move(c.error);
      }
      continue;  // a stale one (its op timed out) only returns nothing
    }
    Slot& s = slots[c.cookie];
    PeerState& peer = peers[static_cast<size_t>(s.peer)];
    switch (s.kind) {
      case Slot::Chunk:
      case Slot::Atomic:
        if (!s.transfer) break;  // its transfer gave up (deadline); only the slot is returned
        s.transfer->inflight--;
        if (!c.ok && s.transfer->error.empty()) {
          s.transfer->error = c.error;
          if (s.kind == Slot::Chunk) {
            s.transfer->error += " (chunk " + std::to_string(s.index + 1) + "/" + std::to_string(s.total) + ")";
          }
        }
        break;
      case Slot::Flush:
      case Slot::Async:
        peer.outstanding--;
        break;
    }
    if (!c.ok && peer.failed.empty()) peer.failed = c.error;
    free_slots.push_back(static_cast<uint32_t>(c.cookie));
  }
}

void ContextImpl::post_flush(int peer, Deadline& deadline) {
  PeerState& ps = peers[static_cast<size_t>(peer)];
  Slot s;
  s.kind = Slot::Flush;
  s.peer = peer;
  Work w;
  w.op = Op::Flush;
  w.peer = peer;
  post_blocking(w, s, deadline, "flush");
  ps.outstanding++;
  ps.dirty = false;
  ps.unflushed = false;
}

// Returns when everything issued to `peer` so far is complete at the target.
void ContextImpl::drain(int peer, Deadline& deadline, const char* what) {
  PeerState& ps = peers[static_cast<size_t>(peer)];
  if (ps.failed.empty()) post_flush(peer, deadline);
  Backoff backoff;
  while (ps.outstanding > 0 && ps.failed.empty()) {
    progress();
    watch();
    if (!ps.failed.empty()) break;
    if (deadline.passed()) {
      degraded = true;
      throw Error(ErrorCode::Timeout, who() + ": " + what + ": peer " + std::to_string(peer) +
                                          " did not complete its operations by the deadline; " + outstanding_summary());
    }
    backoff.idle();
  }
  if (!ps.failed.empty()) {
    throw Error(ErrorCode::PeerFailed, who() + ": " + what + ": " + peer_failed_text(peer, ps.failed));
  }
}

void ContextImpl::quiet(std::chrono::milliseconds timeout) {
  Deadline deadline(timeout);
  for (int p = 0; p < nranks; ++p) {
    const PeerState& ps = peers[static_cast<size_t>(p)];
    if (ps.unflushed || ps.outstanding > 0) drain(p, deadline, "quiet");
  }
}

// A barrier that keeps the transport progressing while it waits: over tcp a peer still flushing
// towards us needs our progress to finish, so a blocking store wait here could deadlock.
void ContextImpl::barrier(std::chrono::milliseconds timeout) {
  quiet(timeout);
  try {
    bs->barrier(timeout, [this] {
      progress();
      sched_yield();  // each store round trip already costs tens of microseconds
    });
  } catch (const bootstrap::BootstrapError& e) {
    watch_now();  // learn the failure the barrier saw, so shutdown knows
    degraded = true;
    throw Error(error_code(e), e.what());  // names this rank, the barrier and the missing or failed ranks
  }
}

// Chunks still in flight point at a Transfer on the caller's stack: detach them before it goes.
void ContextImpl::abandon(Transfer& t) noexcept {
  for (auto& s : slots) {
    if (s.transfer == &t) s.transfer = nullptr;
  }
}

std::string ContextImpl::outstanding_summary() const {
  std::string s;
  for (int p = 0; p < nranks; ++p) {
    const PeerState& ps = peers[static_cast<size_t>(p)];
    if (ps.outstanding > 0) {
      s += (s.empty() ? "" : ", ") + ("peer " + std::to_string(p)) + " (" + std::to_string(ps.outstanding) +
           " in flight)";
    }
  }
  return s.empty() ? "no operations outstanding" : "outstanding: " + s;
}

// ---------------------------------------------------------------------------------------------
// Window / SignalArray handles

namespace {
WindowState& live(const std::shared_ptr<WindowState>& s, const char* what) {
  if (!s) throw Error(ErrorCode::InvalidArgument, std::string(what) + ": empty handle (never allocated)");
  if (!s->ctx) throw Error(ErrorCode::UseAfterFree, std::string(what) + ": window " + s->describe() + " was freed");
  return *s;
}
}  // namespace

const std::string& Window::name() const { return live(s_, "window").name; }
DType Window::dtype() const { return live(s_, "window").dtype; }
Shape2 Window::shape() const { return live(s_, "window").shape; }
size_t Window::bytes() const { return live(s_, "window").bytes; }
bool Window::valid() const noexcept { return s_ && s_->ctx; }
void* Window::data() const { return live(s_, "window data").base(); }
Slice Window::slice(Shape2 offsets, Shape2 shape) const { return Slice{s_, offsets, shape}; }
Slice Window::all() const { return Slice{s_, {0, 0}, live(s_, "window").shape}; }
void Window::check_dtype(DType t) const {
  const WindowState& s = live(s_, "window data");
  if (s.dtype != t) {
    throw Error(ErrorCode::DtypeMismatch, "window " + s.describe() + " accessed as " + dtype_name(t));
  }
}

const std::string& SignalArray::name() const { return live(s_, "signals").name; }
int64_t SignalArray::size() const { return live(s_, "signals").shape[1]; }
bool SignalArray::valid() const noexcept { return s_ && s_->ctx; }
namespace {
// A word index whose byte offset would wrap becomes an offset past every array (the checks at
// use then report it), never a small offset that names a real word.
uint64_t word_offset(int64_t index) {
  uint64_t off = 0;
  return detail::signal_byte_offset(index, off) ? off : UINT64_MAX & ~uint64_t{7};
}
}  // namespace

SignalSlice SignalArray::at(int64_t index) const { return SignalSlice{s_, word_offset(index), 1}; }
SignalSlice SignalArray::slice(int64_t first, int64_t count) const {
  return SignalSlice{s_, word_offset(first), count};
}
SignalSlice SignalArray::at_byte(uint64_t byte_offset) const { return SignalSlice{s_, byte_offset, 1}; }

namespace {
int64_t* signal_word(const std::shared_ptr<WindowState>& s, int64_t index, const char* what) {
  WindowState& st = live(s, what);
  if (index < 0 || index >= st.shape[1]) {
    throw Error(ErrorCode::OutOfBounds, std::string(what) + ": index " + std::to_string(index) +
                                            " outside signal array " + st.describe());
  }
  return static_cast<int64_t*>(st.base()) + index;
}
}  // namespace

int64_t SignalArray::load(int64_t index) const {
  return std::atomic_ref<int64_t>(*signal_word(s_, index, "signal load")).load(std::memory_order_acquire);
}
void SignalArray::store(int64_t index, int64_t value) {
  std::atomic_ref<int64_t>(*signal_word(s_, index, "signal store")).store(value, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// Context

Context::Context(const Options& options) : impl_(std::make_unique<ContextImpl>()) {
  ContextImpl& c = *impl_;
  c.opt = Options::from_env(options);
  c.rank = c.opt.rank;
  c.nranks = c.opt.nranks;
  try {
    bootstrap::BootstrapConfig bc;
    bc.startup_timeout = c.opt.startup_timeout;
    bc.op_timeout = c.opt.op_timeout;
    bc.job_key = c.opt.job_key;
    c.bs = std::make_unique<bootstrap::Bootstrap>(c.rank, c.nranks, bootstrap::HostPort::parse(c.opt.root), bc);
  } catch (const bootstrap::BootstrapError& e) {
    throw Error(error_code(e), e.what());
  }
  c.peers.resize(static_cast<size_t>(c.nranks));
  transport::TransportConfig tc;
  tc.name = c.opt.transport;
  tc.ib_device = c.opt.ib_device;
  tc.ib_port = c.opt.ib_port;
  tc.gid_index = c.opt.gid_index;
  tc.rank = c.rank;
  tc.nranks = c.nranks;
  tc.ucx_rma = c.opt.ucx_rma;
  tc.ucx_tcp_zcopy = c.opt.ucx_tcp_zcopy == 1;
  if (tc.name == "ucx") {
    // The interface that reaches the root carries UCX's tcp traffic too. Asked for by name
    // (RWIN_IFNAME), a wrong one is an error; found by routing, a failure just leaves UCX's default.
    try {
      tc.ifname = bootstrap::choose_interface(bootstrap::HostPort::parse(c.opt.root).host);
    } catch (const bootstrap::BootstrapError& e) {
      const char* asked = std::getenv("RWIN_IFNAME");
      if (asked && *asked) throw Error(ErrorCode::Bootstrap, c.who() + ": " + e.what());
    }
  }
  try {
    c.tp = transport::make_transport(tc);
    c.tp->connect(*c.bs);
    c.caps = c.tp->capabilities();
    if (c.opt.chunk_bytes == 0) c.opt.chunk_bytes = c.caps.default_chunk_bytes;
    if (c.opt.pipeline_depth <= 0) c.opt.pipeline_depth = c.caps.default_pipeline_depth;
    c.scratch = c.tp->allocate(kScratchWords * 8);
  } catch (const transport::TransportError& e) {
    throw Error(ErrorCode::Transport, c.who() + ": " + e.what());
  } catch (const bootstrap::BootstrapError& e) {
    throw Error(error_code(e), c.who() + ": transport connect: " + e.what());
  }
  for (int p = 0; p < c.nranks; ++p) c.peers[static_cast<size_t>(p)].ordered = c.tp->write_then_atomic_ordered(p);
}

Context::~Context() {
  if (!impl_) return;
  ContextImpl& c = *impl_;
  // Bounded: a dead peer must not keep us here; other ranks may still be reading our memory,
  // hence the barrier before anything is released. Never throws (out of memory while leaving:
  // the lease then just closes, which the others also read as this rank failing).
  try {
    const auto bound = std::min<std::chrono::milliseconds>(c.opt.op_timeout, std::chrono::milliseconds(10000));
    c.watch_now();
    bool healthy = !c.degraded;
    for (const auto& p : c.peers) healthy = healthy && p.failed.empty();
    // A job that already lost a peer or missed a deadline cannot complete a barrier (someone it
    // waits for is gone or stuck): leave at once; ~ContextImpl still quiesces before unmapping.
    if (healthy) {
      try {
        c.barrier(bound);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rwin: %s: shutdown: %s\n", c.who().c_str(), e.what());
        healthy = false;
      }
    }
    if (!healthy) c.degraded = true;  // ~ContextImpl then drops the connections without a flush
    // Leaving a broken job: say so at once (the store tells the others this rank failed, and
    // why), so a survivor still putting to us, or waiting on us, ends now instead of at its deadline.
    if (!healthy && c.bs) {
      std::string why;
      if (!c.known_failures.empty()) why = c.failure_text(c.known_failures.front().rank);
      for (size_t p = 0; why.empty() && p < c.peers.size(); ++p) {
        if (!c.peers[p].failed.empty()) why = c.peer_failed_text(static_cast<int>(p), c.peers[p].failed);
      }
      if (why.empty()) why = "an operation timed out (RWIN_TIMEOUT_MS=" + std::to_string(c.opt.op_timeout.count()) + ")";
      c.bs->abandon_lease(why);
    }
  } catch (...) {
    c.degraded = true;
  }
}

int Context::rank() const noexcept { return impl_->rank; }
int Context::size() const noexcept { return impl_->nranks; }
std::string Context::transport_name() const { return impl_->tp->describe(); }
const Options& Context::options() const noexcept { return impl_->opt; }

namespace {

std::shared_ptr<WindowState> create_region(ContextImpl& c, const std::string& name, DType dtype, Shape2 shape,
                                           bool is_signal) {
  const char* what = is_signal ? "alloc_signals" : "alloc_window";
  if (shape[0] <= 0 || shape[1] <= 0) {
    throw Error(ErrorCode::InvalidArgument,
                c.who() + ": " + what + " '" + name + "': shape " + shape_str(shape) + " must be positive");
  }
  auto s = std::make_shared<WindowState>();
  s->name = name;
  s->dtype = dtype;
  s->shape = shape;
  s->bytes = static_cast<size_t>(shape[0]) * static_cast<size_t>(shape[1]) * dtype_size(dtype);
  s->is_signal = is_signal;
  std::vector<bootstrap::Bytes> all;
  try {
    // Rounded up to whole 8-byte words: put(Add) updates 32-bit elements through CAS on the
    // aligned word that holds them, which for an odd element count reaches past the last one.
    s->mr = c.tp->allocate((s->bytes + 7) & ~size_t{7});
    all = c.bs->allgather(detail::window_blob(s->name, s->dtype, s->shape, s->is_signal, s->mr->packed_key()));
  } catch (const transport::TransportError& e) {
    throw Error(ErrorCode::Transport, c.who() + ": " + what + " " + s->describe() + ": " + e.what());
  } catch (const bootstrap::BootstrapError& e) {
    c.watch_now();
    throw Error(error_code(e), c.who() + ": " + what + " " + s->describe() + ": " + e.what());
  }
  // Every rank sees every descriptor, so a mismatch is reported on every rank.
  std::string mismatch;
  std::vector<detail::WindowDesc> descs;
  for (int r = 0; r < c.nranks; ++r) {
    auto d = detail::parse_window_blob(all[static_cast<size_t>(r)]);
    if (!d) {
      throw Error(ErrorCode::Bootstrap, c.who() + ": " + what + " '" + name + "': malformed window descriptor from rank " +
                                            std::to_string(r));
    }
    if (d->dtype != dtype || d->shape != shape || d->name != name || d->is_signal != is_signal) {
      mismatch += "; rank " + std::to_string(r) + " has " + detail::describe_window_desc(*d);
    }
    descs.push_back(*d);
  }
  if (!mismatch.empty()) {
    throw Error(ErrorCode::WindowMismatch, c.who() + ": " + what + ": window differs across ranks: rank " +
                                               std::to_string(c.rank) + " has " + s->describe() + mismatch);
  }
  try {
    for (int r = 0; r < c.nranks; ++r) s->rkeys.push_back(c.tp->unpack_key(r, descs[static_cast<size_t>(r)].key));
  } catch (const transport::TransportError& e) {
    throw Error(ErrorCode::Transport, c.who() + ": " + what + " " + s->describe() + ": " + e.what());
  }
  s->ctx = &c;
  c.windows.push_back(s);
  return s;
}

void free_region(ContextImpl& c, std::shared_ptr<WindowState>& s, const char* what) {
  WindowState& st = live(s, what);
  if (st.ctx != &c) throw Error(ErrorCode::InvalidArgument, c.who() + ": " + what + ": window belongs to another context");
  try {
    c.barrier(c.opt.op_timeout);  // nobody may still write into it
  } catch (...) {
    // Some rank did not arrive: it may still write into this window. The handle is freed for the
    // caller, but the memory stays registered until the transport is quiesced at teardown.
    c.graveyard.push_back(std::move(st.mr));
    st.release();
    std::erase(c.windows, s);
    throw;
  }
  st.release();
  std::erase(c.windows, s);
}

}  // namespace

Window Context::alloc_window(const std::string& name, DType dtype, Shape2 shape) {
  return Window(create_region(*impl_, name, dtype, shape, false));
}

SignalArray Context::alloc_signals(const std::string& name, int64_t count) {
  return SignalArray(create_region(*impl_, name, DType::I64, Shape2{1, count}, true));
}

void Context::free(Window& window) { free_region(*impl_, window.s_, "free window"); }
void Context::free(SignalArray& signals) { free_region(*impl_, signals.s_, "free signals"); }

namespace {

// Checks one side of a put/get and returns its window.
WindowState& check_slice(ContextImpl& c, const char* op, int peer, const char* side, const Slice& s) {
  // Messages are built only on failure: this runs on every put and get.
  auto where = [&] { return c.who() + ": " + op + " peer " + std::to_string(peer) + ": " + side; };
  if (!s.window) throw Error(ErrorCode::InvalidArgument, where() + " slice has no window");
  WindowState& w = *s.window;
  if (!w.ctx) throw Error(ErrorCode::UseAfterFree, where() + " window " + w.describe() + " was freed");
  if (w.ctx != &c) throw Error(ErrorCode::InvalidArgument, where() + " window " + w.describe() + " belongs to another context");
  if (w.is_signal) throw Error(ErrorCode::InvalidArgument, where() + " is a signal array; use notify/wait");
  const bool ok = detail::slice_in_bounds(s.offsets.data(), s.shape.data(), w.shape.data());  // no wrap
  if (!ok) {
    throw Error(ErrorCode::OutOfBounds, where() + " slice offsets " + shape_str(s.offsets) + " shape " +
                                            shape_str(s.shape) + " is outside window " + w.describe());
  }
  return w;
}

void check_pair(ContextImpl& c, const char* op, int peer, const Slice& dst, const Slice& src, WindowState& d,
                WindowState& s) {
  auto where = [&] { return c.who() + ": " + op + " peer " + std::to_string(peer) + ": "; };
  if (dst.shape[0] != src.shape[0] || dst.shape[1] != src.shape[1]) {  // (std::array == calls memcmp)
    throw Error(ErrorCode::ShapeMismatch, where() + "dst shape " + shape_str(dst.shape) + " (window " + d.describe() +
                                              ") differs from src shape " + shape_str(src.shape) + " (window " +
                                              s.describe() + ")");
  }
  if (d.dtype != s.dtype) {
    throw Error(ErrorCode::DtypeMismatch, where() + "dst window " + d.describe() + " and src window " + s.describe() +
                                              " have different dtypes");
  }
}

}  // namespace

// The chunk planner over one transfer between a local and a remote slice of equal shape.
static detail::ChunkPlanner plan_chunks(const ContextImpl& c, const WindowState& local, const Slice& local_slice,
                                        const WindowState& remote, const Slice& remote_slice, uint64_t max_chunk) {
  detail::TransferShape t;
  t.elem_bytes = dtype_size(local.dtype);
  t.shape = local_slice.shape;
  t.local_offsets = local_slice.offsets;
  t.local_cols = local.shape[1];
  t.remote_offsets = remote_slice.offsets;
  t.remote_cols = remote.shape[1];
  t.max_chunk_bytes = max_chunk == 0 ? std::min<uint64_t>(c.opt.chunk_bytes, c.caps.max_message_bytes) : max_chunk;
  return detail::ChunkPlanner(t);
}

// The work request that moves one chunk.
static Work chunk_work(Op op, int peer, WindowState& local, const transport::RemoteKey& rkey, const detail::Chunk& ch) {
  Work w;
  w.op = op;
  w.peer = peer;
  w.local = static_cast<char*>(local.base()) + ch.local_offset;
  w.local_mr = local.mr.get();
  w.remote_addr = rkey.base() + ch.remote_offset;
  w.rkey = &rkey;
  w.bytes = ch.bytes;
  return w;
}

// The common small case: the slices form one contiguous run on both sides that fits one chunk.
// Fills `out` and returns true; false sends the caller to the planner.
static bool single_run(const ContextImpl& c, const WindowState& local, const Slice& ls, const WindowState& remote,
                       const Slice& rs, detail::Chunk& out) {
  const int64_t rows = ls.shape[0], cols = ls.shape[1];
  if (rows != 1 && (cols != local.shape[1] || cols != remote.shape[1])) return false;
  const uint64_t esz = dtype_size(local.dtype);
  out.bytes = static_cast<uint64_t>(rows * cols) * esz;
  if (out.bytes > c.opt.chunk_bytes || out.bytes > c.caps.max_message_bytes) return false;
  out.local_offset = static_cast<uint64_t>(ls.offsets[0] * local.shape[1] + ls.offsets[1]) * esz;
  out.remote_offset = static_cast<uint64_t>(rs.offsets[0] * remote.shape[1] + rs.offsets[1]) * esz;
  return true;
}

// One blocking op without the slot table or a Transfer record: posts it and polls until its own
// completion arrives. The cookie (kSyncBit | peer << 32 | sequence) routes the completion here.
static void run_single(ContextImpl& c, Work& w, const char* what) {
  Deadline deadline(c.opt.op_timeout);
  c.sync_cookie = ContextImpl::kSyncBit | (static_cast<uint64_t>(w.peer) << 32) | (++c.sync_seq & 0xffffffffu);
  c.sync_done = false;
  c.sync_error.clear();
  w.cookie = c.sync_cookie;
  Backoff backoff;
  for (;;) {
    const PostResult r = c.tp->post(w);
    if (r == PostResult::Ok) break;
    if (r == PostResult::PeerFailed) {
      std::string err = c.tp->peer_error(w.peer);
      c.peers[static_cast<size_t>(w.peer)].failed = err;
      throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " to peer " + std::to_string(w.peer) + ": " +
                                             c.peer_failed_text(w.peer, err));
    }
    c.progress();
    c.watch();
    if (deadline.passed()) {
      c.degraded = true;
      throw Error(ErrorCode::Timeout, c.who() + ": " + what + " to peer " + std::to_string(w.peer) +
                                          ": transport stayed busy until the deadline (" + c.tp->describe() + ")");
    }
    backoff.idle();
  }
  backoff.reset();
  PeerState& ps = c.peers[static_cast<size_t>(w.peer)];
  for (;;) {
    c.progress();
    if (c.sync_done) break;
    c.watch();
    if (!ps.failed.empty()) {
      c.sync_cookie = 0;  // its completion, if it ever comes, is stale
      throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " peer " + std::to_string(w.peer) + " (" +
                                             std::to_string(w.bytes) + " bytes): " + c.peer_failed_text(w.peer, ps.failed));
    }
    if (deadline.passed()) {
      const std::string msg = c.who() + ": " + what + " peer " + std::to_string(w.peer) + ": 1 chunk (" +
                              std::to_string(w.bytes) + " bytes) unfinished after " +
                              std::to_string(c.opt.op_timeout.count()) + " ms (" + c.tp->describe() + ")";
      c.peers[static_cast<size_t>(w.peer)].failed = msg;
      c.sync_cookie = 0;  // its completion, if it ever comes, is stale
      throw Error(ErrorCode::Timeout, msg);
    }
    backoff.idle();
  }
  if (!c.sync_error.empty()) {
    throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " peer " + std::to_string(w.peer) + " (" +
                                           std::to_string(w.bytes) + " bytes): " +
                                           c.peer_failed_text(w.peer, c.sync_error + " (chunk 1/1)"));
  }
}

// Moves a rectangle in chunks, keeping at most pipeline_depth in flight.
static void run_transfer(ContextImpl& c, Op op, int peer, WindowState& local, const Slice& local_slice,
                         WindowState& remote, const Slice& remote_slice, const char* what) {
  const transport::RemoteKey& rkey = *remote.rkeys[static_cast<size_t>(peer)];
  detail::Chunk ch;
  if (single_run(c, local, local_slice, remote, remote_slice, ch)) {
    Work w = chunk_work(op, peer, local, rkey, ch);
    run_single(c, w, what);
    return;
  }
  Deadline deadline(c.opt.op_timeout);
  detail::ChunkPlanner planner = plan_chunks(c, local, local_slice, remote, remote_slice, 0);
  Transfer tr;
  uint64_t index = 0;
  bool more = true;
  Backoff backoff;
  while (more || tr.inflight > 0) {
    bool posted = false;
    while (more && tr.inflight < c.opt.pipeline_depth && tr.error.empty()) {
      more = planner.next(ch);
      if (!more) break;
      Work w = chunk_work(op, peer, local, rkey, ch);
      Slot s;
      s.kind = Slot::Chunk;
      s.peer = peer;
      s.transfer = &tr;
      s.index = index++;
      s.total = planner.total_chunks();
      try {
        c.post_blocking(w, s, deadline, what);
      } catch (...) {
        c.abandon(tr);
        throw;
      }
      tr.inflight++;
      posted = true;
    }
    if (!tr.error.empty()) more = false;  // stop posting; collect what is in flight
    if (tr.inflight == 0) break;
    c.progress();
    if (tr.inflight == 0) continue;  // finished in this poll: no clock read on the fast path
    c.watch();
    // A failed peer may never complete the chunks still in flight (also after one of them failed).
    if (const std::string& f = c.peers[static_cast<size_t>(peer)].failed; !f.empty()) {
      c.abandon(tr);  // chunks still in flight complete into nothing
      throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " peer " + std::to_string(peer) + " (" +
                                             std::to_string(planner.total_bytes()) + " bytes, " +
                                             std::to_string(tr.inflight) + " chunks in flight): " +
                                             c.peer_failed_text(peer, tr.error.empty() ? f : tr.error));
    }
    if (deadline.passed()) {
      const std::string msg = c.who() + ": " + what + " peer " + std::to_string(peer) + ": " +
                              std::to_string(tr.inflight) + " of " + std::to_string(planner.total_chunks()) +
                              " chunks (" + std::to_string(planner.total_bytes()) + " bytes) unfinished after " +
                              std::to_string(c.opt.op_timeout.count()) + " ms (" + c.tp->describe() + ")";
      // A peer that cannot finish a transfer by the deadline is treated as failed.
      c.peers[static_cast<size_t>(peer)].failed = msg;
      c.abandon(tr);
      throw Error(ErrorCode::Timeout, msg);
    }
    if (posted) {
      backoff.reset();
    } else {
      backoff.idle();
    }
  }
  if (!tr.error.empty()) {
    throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " peer " + std::to_string(peer) + " (" +
                                           std::to_string(planner.total_bytes()) + " bytes): " +
                                           c.peer_failed_text(peer, tr.error));
  }
}

// Waits until at most `limit` atomics of `tr` are in flight; throws on failure or deadline.
static void settle(ContextImpl& c, Transfer& tr, int peer, Deadline& deadline, const std::string& what,
                   int limit = 0) {
  Backoff backoff;
  while (tr.inflight > limit) {
    c.progress();
    if (tr.inflight <= limit) break;
    c.watch();
    if (const std::string& f = c.peers[static_cast<size_t>(peer)].failed; !f.empty()) {
      c.abandon(tr);
      throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + ": " + c.peer_failed_text(peer, f));
    }
    if (deadline.passed()) {
      c.peers[static_cast<size_t>(peer)].failed = c.who() + ": " + what + ": deadline passed";
      c.abandon(tr);
      throw Error(ErrorCode::Timeout, c.who() + ": " + what + ": " + std::to_string(tr.inflight) +
                                          " element atomics unfinished after " +
                                          std::to_string(c.opt.op_timeout.count()) + " ms (" + c.tp->describe() + ")");
    }
    backoff.idle();
  }
  if (!tr.error.empty()) throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + ": " + c.peer_failed_text(peer, tr.error));
}

// put(atomic = Add): dst[i] += src[i], atomic against every other Add into the same elements.
// 64-bit integers use the transport's remote fetch-add directly. Other dtypes (and 32-bit lanes,
// which RDMA atomics cannot address on their own) use compare-and-swap on the aligned 8-byte
// word that holds them: guess, CAS, retry with the value the CAS returned. Two neighbouring
// 32-bit elements in one word are folded into one CAS.
static void run_accumulate(ContextImpl& c, int peer, WindowState& local, const Slice& src, WindowState& remote,
                           const Slice& dst) {
  Deadline deadline(c.opt.op_timeout);
  const std::string what = "put(Add) peer " + std::to_string(peer) + " into " + remote.describe();
  const size_t esz = dtype_size(local.dtype);
  // Runs only (no cutting): the atomics go element by element.
  detail::ChunkPlanner planner = plan_chunks(c, local, src, remote, dst, uint64_t{1} << 62);
  const transport::RemoteKey& rkey = *remote.rkeys[static_cast<size_t>(peer)];
  const char* base = static_cast<const char*>(local.base());
  Transfer tr;
  detail::Chunk run;
  // Posts one element atomic, keeping at most kAtomicsInFlight of them outstanding.
  auto post_atomic = [&](Work& w) {
    settle(c, tr, peer, deadline, what, kAtomicsInFlight - 1);
    w.peer = peer;
    w.rkey = &rkey;
    w.bytes = 8;
    Slot s;
    s.kind = Slot::Atomic;
    s.peer = peer;
    s.transfer = &tr;
    c.post_blocking(w, s, deadline, "put(Add)");
    tr.inflight++;
  };

  if (local.dtype == DType::I64 || local.dtype == DType::U64) {
    while (planner.next(run)) {
      for (uint64_t off = 0; off < run.bytes; off += 8) {
        Work w;
        w.op = Op::AtomicAdd;
        w.remote_addr = rkey.base() + run.remote_offset + off;
        std::memcpy(&w.operand, base + run.local_offset + off, 8);
        post_atomic(w);
      }
    }
    settle(c, tr, peer, deadline, what);
    return;
  }

  // One entry per remote 8-byte word touched, with the addend of each 4-byte lane (or the word).
  struct WordUpdate {
    uint64_t remote_word;  // offset of the aligned word in the remote window
    char addend[8];        // element values to add, laid out as in the word
    bool lane[2];          // which 4-byte lanes take part (both for 8-byte dtypes)
    uint64_t guess;        // what we believe the word holds
  };
  std::vector<WordUpdate> words;
  while (planner.next(run)) {
    for (uint64_t off = 0; off < run.bytes; off += esz) {
      const uint64_t ro = run.remote_offset + off;
      const uint64_t word = ro & ~uint64_t{7};
      if (words.empty() || words.back().remote_word != word) words.push_back(WordUpdate{word, {}, {false, false}, 0});
      WordUpdate& u = words.back();
      const size_t at = static_cast<size_t>(ro - word);
      std::memcpy(u.addend + at, base + run.local_offset + off, esz);
      if (esz == 8) u.lane[0] = u.lane[1] = true;
      else u.lane[at / 4] = true;
    }
  }
  auto apply = [dt = local.dtype](const WordUpdate& u, uint64_t old) {
    char out[8];
    std::memcpy(out, &old, 8);
    auto lane_add = [&](size_t at) {
      if (dt == DType::F32) {
        float a, b;
        std::memcpy(&a, out + at, 4);
        std::memcpy(&b, u.addend + at, 4);
        a += b;
        std::memcpy(out + at, &a, 4);
      } else {  // I32 / U32: two's complement wrap, same bits for both
        uint32_t a, b;
        std::memcpy(&a, out + at, 4);
        std::memcpy(&b, u.addend + at, 4);
        a += b;
        std::memcpy(out + at, &a, 4);
      }
    };
    if (dt == DType::F64) {
      double a, b;
      std::memcpy(&a, out, 8);
      std::memcpy(&b, u.addend, 8);
      a += b;
      std::memcpy(out, &a, 8);
    } else {
      if (u.lane[0]) lane_add(0);
      if (u.lane[1]) lane_add(4);
    }
    uint64_t r;
    std::memcpy(&r, out, 8);
    return r;
  };
  auto* results = static_cast<uint64_t*>(c.scratch->addr()) + 1;
  const size_t batch_max = kScratchWords - 1;
  for (size_t first = 0; first < words.size(); first += batch_max) {
    const size_t count = std::min(batch_max, words.size() - first);
    std::vector<size_t> pending(count);
    for (size_t i = 0; i < count; ++i) pending[i] = i;
    while (!pending.empty()) {
      for (size_t i : pending) {
        WordUpdate& u = words[first + i];
        Work w;
        w.op = Op::CompareSwap;
        w.local = &results[i];
        w.local_mr = c.scratch.get();
        w.remote_addr = rkey.base() + u.remote_word;
        w.compare = u.guess;
        w.operand = apply(u, u.guess);
        post_atomic(w);
      }
      settle(c, tr, peer, deadline, what);
      std::vector<size_t> again;
      for (size_t i : pending) {
        WordUpdate& u = words[first + i];
        const uint64_t seen = std::atomic_ref<uint64_t>(results[i]).load(std::memory_order_acquire);
        if (seen != u.guess) {  // someone else got there first: retry from what is there now
          u.guess = seen;
          again.push_back(i);
        }
      }
      pending.swap(again);
    }
  }
}

// Every check of a put/get-style call, before anything is posted: the peer, both slices against
// their windows, matching shapes and dtypes. Returns {dst window, src window}.
static std::pair<WindowState&, WindowState&> check_transfer(ContextImpl& c, const char* op, int peer, const Slice& dst,
                                                             const Slice& src) {
  c.check_peer(peer, op);
  WindowState& d = check_slice(c, op, peer, "dst", dst);
  WindowState& s = check_slice(c, op, peer, "src", src);
  check_pair(c, op, peer, dst, src, d, s);
  return {d, s};
}

void Context::put(const Slice& dst, int peer, const Slice& src, AtomicType atomic) {
  ContextImpl& c = *impl_;
  auto [d, s] = check_transfer(c, "put", peer, dst, src);
  if (src.elements() == 0) return;
  if (atomic == AtomicType::Add) {
    run_accumulate(c, peer, s, src, d, dst);
  } else {
    run_transfer(c, Op::Write, peer, s, src, d, dst, "put");
  }
  c.peers[static_cast<size_t>(peer)].dirty = true;
  c.peers[static_cast<size_t>(peer)].unflushed = true;
}

// Posts every chunk of a transfer and returns; each counts as outstanding work to the peer until
// its completion, so quiet/fence/notify (all of which drain the peer) cover it.
static void post_transfer(ContextImpl& c, Op op, int peer, WindowState& local, const Slice& local_slice,
                          WindowState& remote, const Slice& remote_slice, const char* what) {
  Deadline deadline(c.opt.op_timeout);
  detail::ChunkPlanner planner = plan_chunks(c, local, local_slice, remote, remote_slice, 0);
  const transport::RemoteKey& rkey = *remote.rkeys[static_cast<size_t>(peer)];
  PeerState& ps = c.peers[static_cast<size_t>(peer)];
  detail::Chunk ch;
  while (planner.next(ch)) {
    Work w = chunk_work(op, peer, local, rkey, ch);
    Slot s;
    s.kind = Slot::Async;
    s.peer = peer;
    c.post_blocking(w, s, deadline, what);  // a full queue makes it poll, not fail
    ps.outstanding++;
  }
  c.progress();  // hands staged work to the device before returning (transport.h)
}

void Context::put_nbi(const Slice& dst, int peer, const Slice& src) {
  ContextImpl& c = *impl_;
  auto [d, s] = check_transfer(c, "put_nbi", peer, dst, src);
  if (src.elements() == 0) return;
  post_transfer(c, Op::Write, peer, s, src, d, dst, "put_nbi");
  c.peers[static_cast<size_t>(peer)].dirty = true;
  c.peers[static_cast<size_t>(peer)].unflushed = true;
}

void Context::get_nbi(const Slice& dst, int peer, const Slice& src) {
  ContextImpl& c = *impl_;
  auto [d, s] = check_transfer(c, "get_nbi", peer, dst, src);
  if (src.elements() == 0) return;
  post_transfer(c, Op::Read, peer, d, dst, s, src, "get_nbi");
}

void Context::get(const Slice& dst, int peer, const Slice& src) {
  ContextImpl& c = *impl_;
  auto [d, s] = check_transfer(c, "get", peer, dst, src);
  if (src.elements() == 0) return;
  run_transfer(c, Op::Read, peer, d, dst, s, src, "get");
}

namespace {
// `peer` < 0: a local operation (wait, test).
WindowState& check_signal(ContextImpl& c, const char* op, int peer, const SignalSlice& sig) {
  auto where = [&] {
    return c.who() + ": " + op + (peer >= 0 ? " peer " + std::to_string(peer) : std::string()) + ": signal";
  };
  if (!sig.signals) throw Error(ErrorCode::InvalidArgument, where() + " has no signal array");
  WindowState& w = *sig.signals;
  if (!w.ctx) throw Error(ErrorCode::UseAfterFree, where() + " array " + w.describe() + " was freed");
  if (w.ctx != &c) throw Error(ErrorCode::InvalidArgument, where() + " array " + w.describe() + " belongs to another context");
  if (sig.byte_offset % 8 != 0) {
    throw Error(ErrorCode::Misaligned, where() + " byte offset " + std::to_string(sig.byte_offset) +
                                           " in " + w.describe() + " is not 8-byte aligned (64-bit atomics need it)");
  }
  if (sig.count < 1 || sig.byte_offset / 8 + static_cast<uint64_t>(sig.count) > static_cast<uint64_t>(w.shape[1])) {
    throw Error(ErrorCode::OutOfBounds, where() + " words [" + std::to_string(sig.byte_offset / 8) + ", +" +
                                            std::to_string(sig.count) + ") outside " + w.describe());
  }
  return w;
}
}  // namespace

void Context::notify(const SignalSlice& signal, int peer, int64_t value, NotifyOp op) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "notify");
  WindowState& w = check_signal(c, "notify", peer, signal);
  if (signal.count != 1) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": notify peer " + std::to_string(peer) + ": signal slice of " +
                                                std::to_string(signal.count) + " words; notify updates exactly one");
  }
  Deadline deadline(c.opt.op_timeout);
  PeerState& ps = c.peers[static_cast<size_t>(peer)];
  const transport::RemoteKey& rkey = *w.rkeys[static_cast<size_t>(peer)];
  Work work;
  work.op = op == NotifyOp::AtomicAdd ? Op::AtomicAdd : Op::Swap;
  work.peer = peer;
  work.remote_addr = rkey.base() + signal.byte_offset;
  work.rkey = &rkey;
  work.bytes = 8;
  work.operand = static_cast<uint64_t>(value);
  if (op == NotifyOp::Set) {
    // Swap returns the old value; it lands in a scratch slot nobody reads.
    work.local = c.scratch->addr();
    work.local_mr = c.scratch.get();
  }
  // Ordering: when the peer sees this notify, every earlier put to it must be visible. Where the
  // transport orders an atomic after earlier writes to this peer (verbs: one RC QP; UCX direct and
  // am modes), the atomic simply follows them. Otherwise (UCX native) a peer with unflushed writes
  // is drained (flushed and waited for) first: one round trip over tcp, immediate on shared memory.
  if (!ps.ordered && ps.dirty) c.drain(peer, deadline, "notify");
  Slot s;
  s.kind = Slot::Async;
  s.peer = peer;
  c.post_blocking(work, s, deadline, "notify");
  ps.outstanding++;
  ps.unflushed = true;
  // The notify must be on its way when we return, even if the caller then leaves rwin for a while:
  // a transport may hold posted work until the next poll (transport.h).
  c.progress();
}

void Context::wait(const SignalSlice& signal, int64_t expected, WaitCmp cmp,
                   std::optional<std::chrono::milliseconds> timeout) {
  ContextImpl& c = *impl_;
  const WindowState& w = check_signal(c, "wait", -1, signal);
  const auto limit = timeout.value_or(c.opt.op_timeout);
  Deadline deadline(limit);
  int64_t word = 0;  // first word that does not satisfy cmp yet
  Backoff backoff;
  for (uint64_t round = 0;; ++round) {
    while (word < signal.count &&
           compare(load_word(w, signal.byte_offset + static_cast<uint64_t>(word) * 8), cmp, expected)) {
      ++word;
    }
    if (word == signal.count) return;
    c.progress();
    if ((round & 63) == 0) {
      c.watch();
      if (c.failures_reported < c.known_failures.size()) {
        const uint64_t idx = signal.byte_offset / 8 + static_cast<uint64_t>(word);
        c.raise_new_failure(" while waiting on signal '" + w.name + "' word " + std::to_string(idx) + " for " +
                            to_string(cmp) + " " + std::to_string(expected) + " (last value seen " +
                            std::to_string(load_word(w, idx * 8)) + ")");
      }
    }
    if ((round & 63) == 0 && deadline.passed()) {
      const uint64_t idx = signal.byte_offset / 8 + static_cast<uint64_t>(word);
      c.degraded = true;
      throw Error(ErrorCode::Timeout,
                  c.who() + ": wait timed out after " + std::to_string(limit.count()) + " ms on signal '" + w.name +
                      "' word " + std::to_string(idx) + " (slice of " + std::to_string(signal.count) +
                      "): expected value " + to_string(cmp) + " " + std::to_string(expected) + ", last value seen " +
                      std::to_string(load_word(w, idx * 8)) + "; " + c.outstanding_summary());
    }
    backoff.idle();
  }
}

bool Context::test(const SignalSlice& signal, int64_t expected, WaitCmp cmp) {
  ContextImpl& c = *impl_;
  const WindowState& w = check_signal(c, "test", -1, signal);
  c.progress();
  for (int64_t i = 0; i < signal.count; ++i) {
    const uint64_t idx = signal.byte_offset / 8 + static_cast<uint64_t>(i);
    if (compare(load_word(w, idx * 8), cmp, expected)) continue;
    // Not satisfied: a caller polling test() in a loop must learn of a dead peer as a wait would.
    if ((++c.test_calls & 63) == 0) c.watch();
    if (c.failures_reported < c.known_failures.size()) {
      c.raise_new_failure(" while testing signal '" + w.name + "' word " + std::to_string(idx) + " for " +
                          to_string(cmp) + " " + std::to_string(expected));
    }
    return false;
  }
  return true;
}

void Context::fence(int peer) {
  ContextImpl& c = *impl_;
  c.check_peer(peer, "fence");
  Deadline deadline(c.opt.op_timeout);
  c.drain(peer, deadline, "fence");
}

void Context::quiet() { impl_->quiet(impl_->opt.op_timeout); }

void Context::barrier() { impl_->barrier(impl_->opt.op_timeout); }

std::vector<std::vector<uint8_t>> Context::allgather(const std::vector<uint8_t>& mine) {
  try {
    return impl_->bs->allgather(mine);
  } catch (const bootstrap::BootstrapError& e) {
    impl_->watch_now();
    throw Error(error_code(e), impl_->who() + ": allgather: " + e.what());
  }
}

}  // namespace rwin

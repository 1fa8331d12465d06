// Window buffers (collective, registered), typed views of them, signal arrays; handles and free.
#include <atomic>

#include "bounds.h"
#include "context_impl.h"
#include "ops.h"
#include "stripe_locks.h"
#include "window_blob.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)

// ---------------------------------------------------------------------------------------------
// BufferState / WindowState

std::string BufferState::describe() const { return "buffer '" + name + "' (" + std::to_string(bytes) + " bytes)"; }

void BufferState::release() noexcept {
  mapped.clear();
  rkeys.clear();
  mr.reset();
  ctx = nullptr;
}

std::string WindowState::describe() const {
  std::string s = "'" + buf->name + "' " + dtype_name(dtype) + "[" + std::to_string(shape[0]) + "x" +
                  std::to_string(shape[1]) + "] (" + std::to_string(bytes) + " bytes)";
  if (!owns_buffer) s += " at byte " + std::to_string(offset) + " of " + buf->describe();
  return s;
}

// ---------------------------------------------------------------------------------------------
// Handles

namespace {
BufferState& live_buffer(const std::shared_ptr<BufferState>& b, const char* what) {
  if (!b) throw Error(ErrorCode::InvalidArgument, std::string(what) + ": empty buffer handle (never allocated)");
  if (!b->ctx) throw Error(ErrorCode::UseAfterFree, std::string(what) + ": " + b->describe() + " was freed");
  return *b;
}
}  // namespace

const std::string& WindowBuffer::name() const { return live_buffer(s_, "buffer").name; }
size_t WindowBuffer::bytes() const { return live_buffer(s_, "buffer").bytes; }
bool WindowBuffer::valid() const noexcept { return s_ && s_->ctx; }
void* WindowBuffer::data() const { return live_buffer(s_, "buffer data").mr->addr(); }

const std::string& Window::name() const { return live(s_, "window").name(); }
DType Window::dtype() const { return live(s_, "window").dtype; }
Shape2 Window::shape() const { return live(s_, "window").shape; }
size_t Window::bytes() const { return live(s_, "window").bytes; }
uint64_t Window::byte_offset() const { return live(s_, "window").offset; }
WindowBuffer Window::buffer() const { return WindowBuffer(live(s_, "window").buf); }
bool Window::valid() const noexcept { return s_ && s_->ctx(); }
void* Window::data() const { return live(s_, "window data").base(); }
Slice Window::slice(Shape2 offsets, Shape2 shape) const {
  live(s_, "window slice");
  return Slice{s_, offsets, shape};
}
Slice Window::all() const { return Slice{s_, {0, 0}, live(s_, "window").shape}; }
void Window::check_dtype(DType t) const {
  const WindowState& s = live(s_, "window data");
  if (s.dtype != t) {
    throw Error(ErrorCode::DtypeMismatch, "window " + s.describe() + " accessed as " + dtype_name(t));
  }
}

const std::string& SignalArray::name() const { return live(s_, "signals").name(); }
int64_t SignalArray::size() const { return live(s_, "signals").shape[1]; }
bool SignalArray::valid() const noexcept { return s_ && s_->ctx(); }
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
  return reinterpret_cast<int64_t*>(st.base()) + index;
}
}  // namespace

int64_t SignalArray::load(int64_t index) const {
  return std::atomic_ref<int64_t>(*signal_word(s_, index, "signal load")).load(std::memory_order_acquire);
}
void SignalArray::store(int64_t index, int64_t value) {
  std::atomic_ref<int64_t>(*signal_word(s_, index, "signal store")).store(value, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// Allocation and free

namespace {
std::shared_ptr<BufferState> finish_buffer(
    ContextImpl& c, const std::shared_ptr<BufferState>& b, const char* what, const std::string& name, DType dtype,
    Shape2 shape, BlobKind blob_kind, const std::string& describe, const std::vector<int>& members,
    const std::string& scope, const std::function<std::vector<std::vector<uint8_t>>(const std::vector<uint8_t>&)>& exchange);
}  // namespace

// Registers `bytes` here, exchanges the descriptor among `members` (job ranks; `exchange` returns
// every member's blob in that order), checks that every member asked for the same thing (else
// WindowMismatch on every member), unpacks every member's key. `describe` names what this rank asked
// for in messages; `dtype`/`shape` go into the descriptor for the check; `scope` is "" for the job or
// " on team 3 {0, 2}".
std::shared_ptr<BufferState> detail::create_buffer_among(
    ContextImpl& c, const char* what, const std::string& name, size_t bytes, BufferState::Kind kind, DType dtype,
    Shape2 shape, const std::string& describe, const std::vector<int>& members, const std::string& scope,
    const std::function<std::vector<std::vector<uint8_t>>(const std::vector<uint8_t>&)>& exchange) {
  c.check_owner(what);
  auto b = std::make_shared<BufferState>();
  b->kind = kind;
  b->name = name;
  b->bytes = bytes;
  const BlobKind blob_kind = kind == BufferState::Kind::Window    ? BlobKind::Window
                             : kind == BufferState::Kind::Signals ? BlobKind::Signals
                                                                  : BlobKind::Buffer;
  std::vector<bootstrap::Bytes> all;
  try {
    // The user's bytes, then the hidden stripe locks of put(Add) (stripe_locks.h); the lock table
    // starts at a 64-byte boundary, so an int32 signal's CAS on the aligned 8-byte word holding it
    // stays inside the region for an odd size too.
    b->mr = c.tp->allocate(region_bytes(bytes));
    // A transport that applies put(Add) itself takes it into data buffers (not signal words) from
    // before their key leaves this rank, as the staged path does (below).
    if (c.caps.max_add_bytes > 0 && kind != BufferState::Kind::Signals) {
      c.tp->accept_adds(*b->mr, make_region_adder(c, static_cast<char*>(b->mr->addr()), bytes, describe));
    }
  } catch (const transport::TransportError& e) {
    throw Error(ErrorCode::Transport, c.who() + ": " + what + " " + describe + ": " + e.what());
  }
  // Listed before its key leaves this rank: a member that has every key returns and may put(Add)
  // into it at once, and its staged slots reach this rank's staging target while this rank still
  // waits in the exchange (a team's exchange progresses the context), which applies only slots
  // that land in a listed buffer. From here on a failure keeps the memory registered until teardown
  // (a member that got the key may still write into it).
  c.buffers.push_back(b);
  try {
    return finish_buffer(c, b, what, name, dtype, shape, blob_kind, describe, members, scope, exchange);
  } catch (...) {
    c.graveyard.push_back(std::move(b->mr));
    b->release();
    std::erase(c.buffers, b);
    throw;
  }
}

namespace {
// The rest of create_buffer_among, once `b` is allocated and listed: the exchange, the checks, the keys.
std::shared_ptr<BufferState> finish_buffer(
    ContextImpl& c, const std::shared_ptr<BufferState>& b, const char* what, const std::string& name, DType dtype,
    Shape2 shape, BlobKind blob_kind, const std::string& describe, const std::vector<int>& members,
    const std::string& scope, const std::function<std::vector<std::vector<uint8_t>>(const std::vector<uint8_t>&)>& exchange) {
  std::vector<bootstrap::Bytes> all;
  try {
    all = exchange(window_blob(name, dtype, shape, blob_kind, b->mr->packed_key()));
  } catch (const transport::TransportError& e) {
    throw Error(ErrorCode::Transport, c.who() + ": " + what + " " + describe + ": " + e.what());
  } catch (const bootstrap::BootstrapError& e) {
    throw c.store_error(e, c.who() + ": " + what + " " + describe);
  }
  // Every member sees every descriptor, so a mismatch is reported on every member.
  std::string mismatch;
  std::vector<WindowDesc> descs;
  for (size_t i = 0; i < members.size(); ++i) {
    auto d = parse_window_blob(all[i]);
    if (!d) {
      throw Error(ErrorCode::Bootstrap, c.who() + ": " + what + " '" + name + "': malformed window descriptor from rank " +
                                            std::to_string(members[i]));
    }
    if (d->dtype != dtype || d->shape != shape || d->name != name || d->kind != blob_kind) {
      mismatch += "; rank " + std::to_string(members[i]) + " has " + describe_window_desc(*d);
    }
    descs.push_back(*d);
  }
  if (!mismatch.empty()) {
    throw Error(ErrorCode::WindowMismatch, c.who() + ": " + what + scope + ": window differs across " +
                                               (scope.empty() ? "ranks" : "members") + ": rank " +
                                               std::to_string(c.rank) + " has " + describe + mismatch);
  }
  b->rkeys.resize(static_cast<size_t>(c.nranks));  // non-members (of a team buffer) stay null
  for (size_t i = 0; i < members.size(); ++i) {
    try {
      b->rkeys[static_cast<size_t>(members[i])] = c.tp->unpack_key(members[i], descs[i].key);
    } catch (const transport::TransportError& e) {
      // A member that died after it published its key (its shared memory gone: UCX cannot map it) is
      // that member's failure, not the transport's: say so once the store confirms it (a moment).
      if (c.learn_failure(members[i])) {
        throw Error(ErrorCode::PeerFailed, c.who() + ": " + what + " " + describe + ": " + c.failure_text(members[i]) +
                                               " (its key: " + e.what() + ")");
      }
      throw Error(ErrorCode::Transport, c.who() + ": " + what + " " + describe + ": " + e.what());
    }
  }
  b->mapped.assign(static_cast<size_t>(c.nranks), nullptr);
  for (int m : members) {
    if (const auto& k = b->rkeys[static_cast<size_t>(m)]) {
      b->mapped[static_cast<size_t>(m)] = static_cast<char*>(c.tp->mapped(m, *k, k->base(), b->bytes));
    }
  }
  b->ctx = &c;
  return b;
}
}  // namespace

namespace {

// Collective: registers `bytes` here, allgathers the descriptor over the job.
std::shared_ptr<BufferState> create_buffer(ContextImpl& c, const char* what, const std::string& name, size_t bytes,
                                           BufferState::Kind kind, DType dtype, Shape2 shape,
                                           const std::string& describe) {
  std::vector<int> all(static_cast<size_t>(c.nranks));
  for (int r = 0; r < c.nranks; ++r) all[static_cast<size_t>(r)] = r;
  return create_buffer_among(c, what, name, bytes, kind, dtype, shape, describe, all, "",
                             [&](const std::vector<uint8_t>& mine) { return c.bs->allgather(mine); });
}

// A window or signal array with a buffer of its own.
std::shared_ptr<WindowState> create_owned(ContextImpl& c, const std::string& name, DType dtype, Shape2 shape,
                                          bool is_signal) {
  const char* what = is_signal ? "alloc_signals" : "alloc_window";
  if (dtype_size(dtype) == 0) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": " + what + " '" + name + "': dtype code " +
                                                std::to_string(static_cast<int>(dtype)) + " is not a DType");
  }
  int64_t elems = 0;
  uint64_t bytes = 0;
  if (shape[0] <= 0 || shape[1] <= 0 || __builtin_mul_overflow(shape[0], shape[1], &elems) ||
      __builtin_mul_overflow(static_cast<uint64_t>(elems), dtype_size(dtype), &bytes) || bytes > (uint64_t{1} << 62)) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": " + what + " '" + name + "': shape " + shape_str(shape) +
                                                " must be positive and its size fit in 2^62 bytes");
  }
  auto v = std::make_shared<WindowState>();
  v->dtype = dtype;
  v->shape = shape;
  v->bytes = bytes;
  v->owns_buffer = true;
  v->is_signal = is_signal;
  const std::string describe = "'" + name + "' " + dtype_name(dtype) + "[" + std::to_string(shape[0]) + "x" +
                               std::to_string(shape[1]) + "] (" + std::to_string(bytes) + " bytes)";
  v->buf = create_buffer(c, what, name, bytes, is_signal ? BufferState::Kind::Signals : BufferState::Kind::Window,
                         dtype, shape, describe);
  return v;
}

void free_buffer(ContextImpl& c, const std::shared_ptr<BufferState>& b) {
  c.check_owner("free");
  try {
    if (b->team_sync) {
      b->team_sync();  // a team's buffer: only its members hold a copy
    } else {
      c.barrier(c.opt.op_timeout);  // nobody may still write into it
    }
  } catch (...) {
    // Some rank did not arrive: it may still write into this buffer. The handles are freed for the
    // caller, but the memory stays registered until the transport is quiesced at teardown.
    c.graveyard.push_back(std::move(b->mr));
    b->release();
    std::erase(c.buffers, b);
    throw;
  }
  b->release();
  std::erase(c.buffers, b);
}

void free_owned(ContextImpl& c, const std::shared_ptr<WindowState>& s, const char* what) {
  WindowState& st = live(s, what);
  if (st.ctx() != &c) throw Error(ErrorCode::InvalidArgument, c.who() + ": " + what + ": window belongs to another context");
  if (!st.owns_buffer) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": " + what + ": window " + st.describe() +
                                                " is a view; free its buffer instead");
  }
  free_buffer(c, st.buf);
}

}  // namespace

Window Context::alloc_window(const std::string& name, DType dtype, Shape2 shape) {
  return Window(create_owned(*impl_, name, dtype, shape, false));
}

SignalArray Context::alloc_signals(const std::string& name, int64_t count) {
  return SignalArray(create_owned(*impl_, name, DType::I64, Shape2{1, count}, true));
}

WindowBuffer Context::alloc_window_buffer(const std::string& name, size_t bytes) {
  ContextImpl& c = *impl_;
  if (bytes == 0 || bytes > (size_t{1} << 62)) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": alloc_window_buffer '" + name + "': size " +
                                                std::to_string(bytes) + " bytes must be in [1, 2^62]");
  }
  const std::string describe = "buffer '" + name + "' (" + std::to_string(bytes) + " bytes)";
  return WindowBuffer(create_buffer(c, "alloc_window_buffer", name, bytes, BufferState::Kind::Buffer, DType::I32,
                                    Shape2{1, static_cast<int64_t>(bytes)}, describe));
}

Window Context::window(const WindowBuffer& buffer, DType dtype, Shape2 shape, uint64_t byte_offset) {
  ContextImpl& c = *impl_;
  BufferState& b = live_buffer(buffer.s_, "window");
  auto what = [&] {
    return c.who() + ": window " + dtype_name(dtype) + shape_str(shape) + " at byte " + std::to_string(byte_offset) +
           " of " + b.describe();
  };
  if (b.ctx != &c) throw Error(ErrorCode::InvalidArgument, what() + ": the buffer belongs to another context");
  if (b.kind == BufferState::Kind::Signals) {
    throw Error(ErrorCode::InvalidArgument, what() + ": a signal array's buffer; use its SignalSlices");
  }
  const uint64_t esz = dtype_size(dtype);
  if (esz == 0) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": window of " + b.describe() + ": dtype code " +
                                                std::to_string(static_cast<int>(dtype)) + " is not a DType");
  }
  if (shape[0] <= 0 || shape[1] <= 0) throw Error(ErrorCode::InvalidArgument, what() + ": the shape must be positive");
  if (byte_offset % esz != 0) {
    throw Error(ErrorCode::Misaligned, what() + ": the byte offset is not a multiple of the element size " +
                                           std::to_string(esz));
  }
  uint64_t bytes = 0;
  if (!view_in_bounds(byte_offset, shape.data(), esz, b.bytes, bytes)) {
    throw Error(ErrorCode::OutOfBounds, what() + ": the view reaches past the end of the buffer");
  }
  auto v = std::make_shared<WindowState>();
  v->buf = buffer.s_;
  v->dtype = dtype;
  v->shape = shape;
  v->bytes = bytes;
  v->offset = byte_offset;
  return Window(std::move(v));
}

void Context::free(Window& window) { free_owned(*impl_, window.s_, "free window"); }
void Context::free(SignalArray& signals) { free_owned(*impl_, signals.s_, "free signals"); }
void Context::free(WindowBuffer& buffer) {
  ContextImpl& c = *impl_;
  BufferState& b = live_buffer(buffer.s_, "free buffer");
  if (b.ctx != &c) throw Error(ErrorCode::InvalidArgument, c.who() + ": free buffer: the buffer belongs to another context");
  free_buffer(c, buffer.s_);
}

}  // namespace rwin

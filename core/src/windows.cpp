// Collective windows and signal arrays: allocation with a cross-rank check, handles, free.
#include <atomic>

#include "bounds.h"
#include "context_impl.h"
#include "ops.h"
#include "window_blob.h"

namespace rwin {

using Clock = std::chrono::steady_clock;
using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::PostResult;
using transport::Work;

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
// Window / SignalArray handles

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

}  // namespace rwin

// Argument checks of every operation, done before anything is posted. Messages are built only
// when a check fails: these run on every put, get, notify and wait.
#include "bounds.h"
#include "context_impl.h"
#include "ops.h"

namespace rwin {

using namespace detail;  // the core's internal types (context_impl.h, ops.h)

std::string detail::shape_str(Shape2 s) { return "[" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + "]"; }

WindowState& detail::live(const std::shared_ptr<WindowState>& s, const char* what) {
  if (!s) throw Error(ErrorCode::InvalidArgument, std::string(what) + ": empty handle (never allocated)");
  if (!s->ctx()) throw Error(ErrorCode::UseAfterFree, std::string(what) + ": window " + s->describe() + " was freed");
  return *s;
}

namespace {
// A team window has no remote key for a rank outside the team.
std::string not_member(const WindowState& w, int peer) {
  return " belongs to " + w.buf->team + "; peer " + std::to_string(peer) + " is not a member";
}
}  // namespace

// One side of a put/get failed its check (ops.h): find which part and throw.
void detail::slice_failed(ContextImpl& c, const char* op, int peer, const char* side, const Slice& s) {
  auto where = [&] { return c.who() + ": " + op + " peer " + std::to_string(peer) + ": " + side; };
  if (!s.window) throw Error(ErrorCode::InvalidArgument, where() + " slice has no window");
  WindowState& w = *s.window;
  if (!w.ctx()) throw Error(ErrorCode::UseAfterFree, where() + " window " + w.describe() + " was freed");
  if (w.ctx() != &c) throw Error(ErrorCode::InvalidArgument, where() + " window " + w.describe() + " belongs to another context");
  if (w.is_signal) throw Error(ErrorCode::InvalidArgument, where() + " is a signal array; use notify/wait");
  if (!w.buf->team.empty() && !w.buf->rkeys[static_cast<size_t>(peer)]) throw Error(ErrorCode::InvalidArgument, where() + " window " + w.describe() + not_member(w, peer));
  throw Error(ErrorCode::OutOfBounds, where() + " slice offsets " + shape_str(s.offsets) + " shape " +
                                          shape_str(s.shape) + " is outside window " + w.describe());
}

void detail::pair_failed(ContextImpl& c, const char* op, int peer, const Slice& dst, const Slice& src, WindowState& d,
                         WindowState& s) {
  auto where = [&] { return c.who() + ": " + op + " peer " + std::to_string(peer) + ": "; };
  if (dst.shape[0] != src.shape[0] || dst.shape[1] != src.shape[1]) {
    throw Error(ErrorCode::ShapeMismatch, where() + "dst shape " + shape_str(dst.shape) + " (window " + d.describe() +
                                              ") differs from src shape " + shape_str(src.shape) + " (window " +
                                              s.describe() + ")");
  }
  throw Error(ErrorCode::DtypeMismatch, where() + "dst window " + d.describe() + " and src window " + s.describe() +
                                            " have different dtypes");
}

uint64_t detail::check_local(ContextImpl& c, const char* op, int peer, const char* side, const Local& l,
                             const Slice& other, const WindowState& w) {
  auto where = [&] { return c.who() + ": " + op + " peer " + std::to_string(peer) + ": " + side + " local memory"; };
  if (l.shape[0] < 0 || l.shape[1] < 0) {
    throw Error(ErrorCode::InvalidArgument, where() + " shape " + shape_str(l.shape) + " is negative");
  }
  const int64_t stride = l.row_stride == 0 ? l.shape[1] : l.row_stride;
  if (stride < l.shape[1]) {
    throw Error(ErrorCode::InvalidArgument, where() + " row stride " + std::to_string(l.row_stride) +
                                                " is shorter than a row of shape " + shape_str(l.shape));
  }
  if (l.shape[0] != other.shape[0] || l.shape[1] != other.shape[1]) {
    throw Error(ErrorCode::ShapeMismatch, where() + " shape " + shape_str(l.shape) + " differs from the window slice's " +
                                              shape_str(other.shape) + " (window " + w.describe() + ")");
  }
  if (l.dtype != w.dtype) {
    throw Error(ErrorCode::DtypeMismatch, where() + " of " + dtype_name(l.dtype) + " and window " + w.describe() +
                                              " have different dtypes");
  }
  if (l.shape[0] == 0 || l.shape[1] == 0) return 0;
  if (!l.data) throw Error(ErrorCode::InvalidArgument, where() + " is a null pointer");
  // ((rows - 1) * stride + cols) * esz, refused when it does not fit (no product that could wrap).
  const uint64_t esz = dtype_size(l.dtype);
  uint64_t elems = 0, bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(l.shape[0] - 1), static_cast<uint64_t>(stride), &elems) ||
      __builtin_add_overflow(elems, static_cast<uint64_t>(l.shape[1]), &elems) ||
      __builtin_mul_overflow(elems, esz, &bytes) ||
      bytes > UINTPTR_MAX - reinterpret_cast<uintptr_t>(l.data)) {
    throw Error(ErrorCode::OutOfBounds, where() + " shape " + shape_str(l.shape) + " with row stride " +
                                            std::to_string(stride) + " does not fit in the address space");
  }
  return bytes;
}

// `peer` < 0: a local operation (wait, test).
SignalTarget detail::check_signal(ContextImpl& c, const char* op, int peer, const SignalSlice& sig) {
  auto where = [&] {
    return c.who() + ": " + op + (peer >= 0 ? " peer " + std::to_string(peer) : std::string()) + ": signal";
  };
  if (!sig.signals) throw Error(ErrorCode::InvalidArgument, where() + " has no signal array");
  const WindowState& w = *sig.signals;
  if (!w.ctx()) throw Error(ErrorCode::UseAfterFree, where() + " array " + w.describe() + " was freed");
  if (w.ctx() != &c) throw Error(ErrorCode::InvalidArgument, where() + " array " + w.describe() + " belongs to another context");
  if (!w.is_signal) throw Error(ErrorCode::InvalidArgument, where() + " slice does not name a signal array");
  if (sig.byte_offset % 8 != 0) {
    throw Error(ErrorCode::Misaligned, where() + " byte offset " + std::to_string(sig.byte_offset) +
                                           " in " + w.describe() + " is not 8-byte aligned (64-bit atomics need it)");
  }
  // (byte_offset / 8 <= 2^61 and count < 2^63: the sum cannot wrap.)
  if (sig.count < 0 || sig.byte_offset / 8 + static_cast<uint64_t>(sig.count) > static_cast<uint64_t>(w.shape[1])) {
    throw Error(ErrorCode::OutOfBounds, where() + " words [" + std::to_string(sig.byte_offset / 8) + ", +" +
                                            std::to_string(sig.count) + ") outside " + w.describe());
  }
  if (peer >= 0 && !w.buf->team.empty() && !w.buf->rkeys[static_cast<size_t>(peer)]) {
    throw Error(ErrorCode::InvalidArgument, where() + " array " + w.describe() + not_member(w, peer));
  }
  SignalTarget t;
  t.w = &w;
  t.width = 8;
  t.offsets = {0, static_cast<int64_t>(sig.byte_offset / 8)};
  t.shape = {1, sig.count};
  return t;
}

namespace {
// Signals (wait/test/notify) are int32/int64; fetching atomics also take the unsigned types.
SignalTarget check_element_slice(ContextImpl& c, const char* op, int peer, const Slice& sig, bool atomic) {
  auto where = [&] {
    return c.who() + ": " + op + (peer >= 0 ? " peer " + std::to_string(peer) : std::string()) +
           (atomic ? ": target" : ": signal");
  };
  // A fetching atomic's one element, named in its messages ("element [0, 3] of window ...").
  auto elem = [&] { return atomic ? " element " + shape_str(sig.offsets) + " of" : std::string(); };
  if (!sig.window) throw Error(ErrorCode::InvalidArgument, where() + " slice has no window");
  const WindowState& w = *sig.window;
  if (!w.ctx()) throw Error(ErrorCode::UseAfterFree, where() + elem() + " window " + w.describe() + " was freed");
  if (w.ctx() != &c) throw Error(ErrorCode::InvalidArgument, where() + " window " + w.describe() + " belongs to another context");
  const bool signed_int = w.dtype == DType::I32 || w.dtype == DType::I64;
  if (!signed_int && !(atomic && (w.dtype == DType::U32 || w.dtype == DType::U64))) {
    throw Error(ErrorCode::DtypeMismatch, where() + elem() + " window " + w.describe() +
                                              (atomic ? " is not int32, int64, uint32 or uint64 (fetching atomics act on those)"
                                                      : " is not int32 or int64 (signals are)"));
  }
  if (!slice_in_bounds(sig.offsets.data(), sig.shape.data(), w.shape.data())) {
    throw Error(ErrorCode::OutOfBounds, where() + " offsets " + shape_str(sig.offsets) + " shape " +
                                            shape_str(sig.shape) + " is outside window " + w.describe());
  }
  if (peer >= 0 && !w.buf->team.empty() && !w.buf->rkeys[static_cast<size_t>(peer)]) {
    throw Error(ErrorCode::InvalidArgument, where() + elem() + " window " + w.describe() + not_member(w, peer));
  }
  SignalTarget t;
  t.w = &w;
  t.width = dtype_size(w.dtype);
  t.offsets = sig.offsets;
  t.shape = sig.shape;
  return t;
}
}  // namespace

SignalTarget detail::check_signal(ContextImpl& c, const char* op, int peer, const Slice& sig) {
  return check_element_slice(c, op, peer, sig, false);
}

SignalTarget detail::check_atomic_target(ContextImpl& c, const char* op, int peer, const Slice& target) {
  SignalTarget t = check_element_slice(c, op, peer, target, true);
  if (t.elements() != 1) {
    throw Error(ErrorCode::InvalidArgument, c.who() + ": " + op + " peer " + std::to_string(peer) + ": target slice of " +
                                                std::to_string(t.elements()) + " elements of " + t.w->describe() +
                                                "; a fetching atomic acts on exactly one");
  }
  return t;
}

}  // namespace rwin

// Argument checks of every operation, done before anything is posted. Messages are built only
// when a check fails: these run on every put, get, notify and wait.
#include "bounds.h"
#include "context_impl.h"
#include "ops.h"

namespace rwin {

using Clock = std::chrono::steady_clock;
using namespace detail;  // the core's internal types (context_impl.h, ops.h)
using transport::Op;
using transport::PostResult;
using transport::Work;

std::string detail::shape_str(Shape2 s) { return "[" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + "]"; }

WindowState& detail::live(const std::shared_ptr<WindowState>& s, const char* what) {
  if (!s) throw Error(ErrorCode::InvalidArgument, std::string(what) + ": empty handle (never allocated)");
  if (!s->ctx()) throw Error(ErrorCode::UseAfterFree, std::string(what) + ": window " + s->describe() + " was freed");
  return *s;
}

// Checks one side of a put/get and returns its window.
WindowState& detail::check_slice(ContextImpl& c, const char* op, int peer, const char* side, const Slice& s) {
  // Messages are built only on failure: this runs on every put and get.
  auto where = [&] { return c.who() + ": " + op + " peer " + std::to_string(peer) + ": " + side; };
  if (!s.window) throw Error(ErrorCode::InvalidArgument, where() + " slice has no window");
  WindowState& w = *s.window;
  if (!w.ctx()) throw Error(ErrorCode::UseAfterFree, where() + " window " + w.describe() + " was freed");
  if (w.ctx() != &c) throw Error(ErrorCode::InvalidArgument, where() + " window " + w.describe() + " belongs to another context");
  if (w.is_signal) throw Error(ErrorCode::InvalidArgument, where() + " is a signal array; use notify/wait");
  const bool ok = detail::slice_in_bounds(s.offsets.data(), s.shape.data(), w.shape.data());  // no wrap
  if (!ok) {
    throw Error(ErrorCode::OutOfBounds, where() + " slice offsets " + shape_str(s.offsets) + " shape " +
                                            shape_str(s.shape) + " is outside window " + w.describe());
  }
  return w;
}

void detail::check_pair(ContextImpl& c, const char* op, int peer, const Slice& dst, const Slice& src, WindowState& d,
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

// Every check of a put/get-style call, before anything is posted: the peer, both slices against
// their windows, matching shapes and dtypes. Returns {dst window, src window}.
std::pair<WindowState&, WindowState&> detail::check_transfer(ContextImpl& c, const char* op, int peer, const Slice& dst,
                                                             const Slice& src) {
  c.check_peer(peer, op);
  WindowState& d = check_slice(c, op, peer, "dst", dst);
  WindowState& s = check_slice(c, op, peer, "src", src);
  check_pair(c, op, peer, dst, src, d, s);
  return {d, s};
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
  SignalTarget t;
  t.w = &w;
  t.width = 8;
  t.offsets = {0, static_cast<int64_t>(sig.byte_offset / 8)};
  t.shape = {1, sig.count};
  return t;
}

SignalTarget detail::check_signal(ContextImpl& c, const char* op, int peer, const Slice& sig) {
  auto where = [&] {
    return c.who() + ": " + op + (peer >= 0 ? " peer " + std::to_string(peer) : std::string()) + ": signal";
  };
  if (!sig.window) throw Error(ErrorCode::InvalidArgument, where() + " slice has no window");
  const WindowState& w = *sig.window;
  if (!w.ctx()) throw Error(ErrorCode::UseAfterFree, where() + " window " + w.describe() + " was freed");
  if (w.ctx() != &c) throw Error(ErrorCode::InvalidArgument, where() + " window " + w.describe() + " belongs to another context");
  if (w.dtype != DType::I32 && w.dtype != DType::I64) {
    throw Error(ErrorCode::DtypeMismatch, where() + " window " + w.describe() + " is not int32 or int64 (signals are)");
  }
  if (!slice_in_bounds(sig.offsets.data(), sig.shape.data(), w.shape.data())) {
    throw Error(ErrorCode::OutOfBounds, where() + " offsets " + shape_str(sig.offsets) + " shape " +
                                            shape_str(sig.shape) + " is outside window " + w.describe());
  }
  SignalTarget t;
  t.w = &w;
  t.width = dtype_size(w.dtype);
  t.offsets = sig.offsets;
  t.shape = sig.shape;
  return t;
}

}  // namespace rwin

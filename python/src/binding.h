// What the translation units of rwin._rwin share: the Context and window wrappers, the fork guard,
// error helpers, argument conversions and each file's bind_* function (module.cpp defines the module
// and rwin.Context; errors.cpp the error types; dtypes.cpp the element types; views.cpp windows,
// slices, numpy and DLPack; p2p.cpp the point-to-point calls; collectives.cpp the collectives and
// teams; agent.cpp the run-time peers, rwin.Agent).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rwin/rwin.h"

namespace py = pybind11;

namespace rwin_py {

using rwin::DType;
using rwin::ErrorCode;
using rwin::Shape2;

// ---------------------------------------------------------------------------------------------
// Fork detection

inline std::atomic<uint64_t> g_fork_gen{0};
inline std::atomic<int> g_live{0};          // Contexts open in this process (including ones inherited over fork)
inline std::atomic<int> g_live_at_fork{0};  // > 0: an ancestor had an open Context when it forked us
inline void after_fork_child() {
  g_fork_gen.fetch_add(1, std::memory_order_relaxed);
  g_live_at_fork.fetch_add(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

struct ForkedError : rwin::Error {
  using rwin::Error::Error;
};


[[noreturn]] inline void fail(ErrorCode code, const std::string& msg) { throw rwin::Error(code, msg); }

// Sets the Python error an rwin::Error (or a ForkedError) raises: rwin.<Code>Error, .code, .message
// (errors.cpp; for calls that bypass pybind11's exception translator).
void set_python_error(const rwin::Error& e);

// Element types (dtypes.cpp).
const char* py_dtype_name(DType t);
DType to_dtype(py::handle h);  // an rwin.DType, a name ("bfloat16", "f32") or a numpy dtype
py::dtype np_dtype(DType t);   // of a window's .numpy() view (bfloat16: uint16)
bool dtype_from_numpy(const py::dtype& d, DType* out, bool* is_ml_bf16);  // false: no rwin element type
std::string shape_text(Shape2 s);  // "[rows x columns]" (views.cpp)

// ---------------------------------------------------------------------------------------------
// Context

struct RwContext {
  std::unique_ptr<rwin::Context> ctx;
  // Guards `ctx` the pointer (not the Context) for fail_peer, the one call made without `mu`, from any
  // thread: close() takes the Context out under it, then destroys it outside it.
  std::mutex fail_mu;
  uint64_t gen = 0;
  pid_t pid = 0;
  std::mutex mu;
  int rank = -1;
  int nranks = -1;
  uint64_t next_buffer = 0;
  std::string transport;
  // numpy operands of put_nbi/get_nbi (peer, array), kept alive until quiet/barrier/fence(peer)
  std::vector<std::pair<int, py::object>> pending;

  bool forked() const noexcept { return gen != g_fork_gen.load(std::memory_order_relaxed); }
  void check_fork(const char* what) const {
    if (forked()) {
      throw ForkedError(ErrorCode::InvalidArgument,
                        std::string(what) + ": this rwin.Context was created in process " + std::to_string(pid) +
                            " and is used in process " + std::to_string(getpid()) +
                            " after os.fork(); a Context does not cross fork: create a new rwin.Context in the child");
    }
  }
  rwin::Context& live(const char* what) {
    if (!ctx) fail(ErrorCode::UseAfterFree, std::string(what) + ": the rwin.Context is closed");
    return *ctx;
  }
  // Runs f(context) with the GIL released and the mutex held.
  template <class F>
  auto run(const char* what, F&& f) {
    check_fork(what);  // before the mutex: a child may have inherited it locked
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lk(mu);
    return f(live(what));
  }
  void detach_in_child(const char* what) {
    if (ctx) {
      std::fprintf(stderr,
                   "rwin: %s in process %d of a Context created in process %d (before os.fork()): detached, not "
                   "torn down (the parent still uses its connections)\n",
                   what, static_cast<int>(getpid()), static_cast<int>(pid));
      (void)ctx.release();  // leaked on purpose: never run ~Context in the child
    }
  }
  void close() {
    if (forked()) return detach_in_child("close()");
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lk(mu);
    if (ctx) g_live.fetch_sub(1, std::memory_order_relaxed);
    std::unique_ptr<rwin::Context> going;
    {
      std::lock_guard<std::mutex> fl(fail_mu);
      going = std::move(ctx);
    }
    going.reset();
  }
  ~RwContext() {
    if (forked()) {
      detach_in_child("garbage collection");
      return;
    }
    if (!ctx) return;
    g_live.fetch_sub(1, std::memory_order_relaxed);
    if (_Py_IsFinalizing()) {
      ctx.reset();
    } else {
      py::gil_scoped_release nogil;
      ctx.reset();
    }
  }
  void drop_pending(int peer) {  // GIL held
    if (peer < 0) {
      pending.clear();
      return;
    }
    std::vector<std::pair<int, py::object>> keep;
    for (auto& p : pending) {
      if (p.first != peer) keep.push_back(std::move(p));
    }
    pending.swap(keep);
  }
};

// ---------------------------------------------------------------------------------------------
// Buffers, windows, slices

struct RwBuffer {
  rwin::WindowBuffer b;
  py::object ctx;
};

// What put/get/notify/wait take as a window operand: a whole window or a slice of one.
struct View {
  rwin::Slice s;           // the region (a window: all of it)
  rwin::Window w;          // the window it is of
  py::object keep;         // the context (for a window) or the window (for a slice)
  DType dtype = DType::F32;
  Shape2 wshape{0, 0};     // the window's shape
  size_t esz = 4;
  virtual ~View() = default;
  bool is_window() const { return s.offsets == Shape2{0, 0} && s.shape == wshape; }
  char* data() const {  // element [offsets] of this rank's copy
    char* base = static_cast<char*>(w.data());
    return base + (s.offsets[0] * wshape[1] + s.offsets[1]) * static_cast<int64_t>(esz);
  }
};
struct RwWindow : View {};
struct RwSlice : View {};

inline View* as_view(py::handle h) {
  py::detail::make_caster<View> c;
  if (!c.load(h, false)) return nullptr;
  return &py::detail::cast_op<View&>(c);
}

View& need_view(py::handle h, const char* what);              // InvalidArgument for anything else (views.cpp)
// A numpy array as plain local memory of the same dtype and shape as `side`, no copy (views.cpp).
rwin::Local to_local(py::handle obj, const View& side, bool writable, const char* what);
std::optional<std::chrono::milliseconds> to_timeout(py::handle t);  // seconds or None (p2p.cpp)

// Binds rwin.Error, its subclasses and the exception translator (errors.cpp).
void bind_errors(py::module_& m);

// Binds rwin.DType and rwin.float32 ... (dtypes.cpp).
void bind_dtypes(py::module_& m);

// Binds rwin.WindowBuffer, rwin.View, rwin.Window and rwin.Slice (views.cpp).
void bind_views(py::module_& m);

// Binds the point-to-point calls and their enums onto the module and its Context class (p2p.cpp).
void bind_p2p(py::module_& m, py::class_<RwContext>& context);

// Binds the collectives, ReduceOp and rwin.Team onto the module and its Context class (collectives.cpp).
void bind_collectives(py::module_& m, py::class_<RwContext>& context);

// Binds rwin.Agent, rwin.Region and rwin.RemoteRegion (agent.cpp; issue 15).
void bind_domain(py::module_& m);  // domain.cpp
void bind_agent(py::module_& m);

// rwin.Context(store=obj): `obj` (torch.distributed.Store's methods) as an rwin::Store (store.cpp).
// Throws InvalidArgument naming a missing method.
std::shared_ptr<rwin::Store> make_py_store(py::object obj);

}  // namespace rwin_py

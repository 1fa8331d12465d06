// Private to the sources of the C ABI (c_api*.cpp, rwin/rwin_c.h): the structs behind its opaque
// handle types and the helpers every entry point uses (guard() turns what the C++ API throws into a
// status and this thread's last error; need(), context(), window(), ... check arguments).
// Non-template helpers are defined in c_api.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "rwin/agent.h"
#include "rwin/collectives.h"
#include "rwin/domain.h"
#include "rwin/rwin.h"
#include "rwin/rwin_c.h"

struct rwin_context {
  std::unique_ptr<rwin::Context> ctx;
};
struct rwin_buffer {
  rwin::WindowBuffer b;
};
struct rwin_window {
  rwin::Window w;
};
struct rwin_signals {
  rwin::SignalArray s;
};
struct rwin_agent {
  std::unique_ptr<rwin::Agent> a;
};
struct rwin_region {
  rwin::Region r;
};
struct rwin_remote_region {
  rwin::RemoteRegion r;
};
struct rwin_domain {
  std::unique_ptr<rwin::Domain> d;
};
struct rwin_request {
  rwin::CollectiveRequest r;
};

// Internal to librwin (hidden, as when these lived in c_api.cpp's anonymous namespace).
#pragma GCC visibility push(hidden)
namespace rwin_c_api {

// Sets this thread's last error ("rwin: fn: what" unless `what` already names rwin) and returns `status`.
rwin_status_t fail(rwin_status_t status, const char* fn, const char* what) noexcept;

// Runs `f`, mapping every exception to a status. `fn` names the entry point in messages not from rwin.
template <class F>
rwin_status_t guard(const char* fn, F&& f) noexcept {
  try {
    f();
    return RWIN_OK;
  } catch (const rwin::Error& e) {
    return fail(static_cast<rwin_status_t>(1 + static_cast<int>(e.code())), fn, e.what());
  } catch (const std::bad_alloc&) {
    return fail(RWIN_ERR_NO_MEMORY, fn, "out of memory");
  } catch (const std::exception& e) {
    return fail(RWIN_ERR_INTERNAL, fn, e.what());
  } catch (...) {
    return fail(RWIN_ERR_INTERNAL, fn, "an exception that is not a std::exception");
  }
}

[[noreturn]] void invalid(const char* fn, const std::string& what);
template <class T>
T* need(T* p, const char* fn, const char* name) {
  if (p == nullptr) invalid(fn, std::string(name) + " is NULL");
  return p;
}
rwin::Context& context(rwin_context_t* c, const char* fn);

rwin::DType dtype(rwin_dtype_t d, const char* fn);
rwin::AtomicType atomic(rwin_atomic_t a, const char* fn);
rwin::NotifyOp notify_op(rwin_notify_op_t o, const char* fn);
rwin::WaitCmp cmp(rwin_cmp_t c, const char* fn);
rwin::ReduceOp reduce_op(rwin_reduce_op_t o, const char* fn);

const rwin::Window& window(const rwin_window_t* w, const char* fn, const char* name);
std::optional<std::chrono::milliseconds> timeout(int64_t ms);
std::string text(const char* s);

template <class H, class F>
rwin_status_t make_handle(const char* fn, H** out, F&& make) noexcept {
  if (out) *out = nullptr;
  return guard(fn, [&] {
    need(out, fn, "out");
    *out = new H{make()};
  });
}

}  // namespace rwin_c_api
#pragma GCC visibility pop

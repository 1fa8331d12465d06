// rwin's C ABI (rwin/rwin_c.h): each entry point checks its pointers and enum values, calls the C++ API
// and turns whatever it throws into a status and this thread's last error. Nothing is thrown out.
// This file: the helpers all entry points share (c_api_util.h), status names, the last error, the
// version, dtype sizes and rwin_options_init. The entry points by area: c_api_context.cpp
// (contexts, windows, RMA, signals, atomics, counters), c_api_collectives.cpp, c_api_agent.cpp
// (agents and domains).
#include <cstring>
#include <string>

#include "c_api_util.h"
#include "rwin/version.h"

namespace {

using rwin::ErrorCode;

// The C values are the C++ enums' numbering: casting is the conversion.
static_assert(RWIN_ERR_INVALID_ARGUMENT == 1 + static_cast<int>(ErrorCode::InvalidArgument));
static_assert(RWIN_ERR_COLLECTIVE_MISMATCH == 1 + static_cast<int>(ErrorCode::CollectiveMismatch));
static_assert(RWIN_U16 == static_cast<int>(rwin::DType::U16) && RWIN_I8 == static_cast<int>(rwin::DType::I8));
static_assert(RWIN_NOTIFY_SET == static_cast<int>(rwin::NotifyOp::Set));
static_assert(RWIN_ATOMIC_ADD == static_cast<int>(rwin::AtomicType::Add));
static_assert(RWIN_CMP_LE == static_cast<int>(rwin::WaitCmp::LE));
static_assert(RWIN_REDUCE_PROD == static_cast<int>(rwin::ReduceOp::Prod));

thread_local std::string last_error;

}  // namespace

namespace rwin_c_api {

rwin_status_t fail(rwin_status_t status, const char* fn, const char* what) noexcept {
  try {
    last_error = what;
    if (std::strncmp(what, "rwin:", 5) != 0) last_error = std::string("rwin: ") + fn + ": " + what;
  } catch (...) {
    last_error.clear();  // no memory for the message: the status still says it
  }
  return status;
}
[[noreturn]] void invalid(const char* fn, const std::string& what) {
  throw rwin::Error(ErrorCode::InvalidArgument, std::string(fn) + ": " + what);
}
rwin::Context& context(rwin_context_t* c, const char* fn) {
  need(c, fn, "ctx");
  if (!c->ctx) invalid(fn, "ctx is not a live context");
  return *c->ctx;
}

rwin::DType dtype(rwin_dtype_t d, const char* fn) {
  if (static_cast<int>(d) < 0 || static_cast<int>(d) > static_cast<int>(RWIN_U16)) {
    invalid(fn, "dtype " + std::to_string(static_cast<int>(d)) + " is not an rwin_dtype_t");
  }
  return static_cast<rwin::DType>(d);
}
namespace {
template <class E>
E checked_enum(int v, int max, const char* fn, const char* type) {
  if (v < 0 || v > max) invalid(fn, std::to_string(v) + " is not an " + type);
  return static_cast<E>(v);
}
}  // namespace
rwin::AtomicType atomic(rwin_atomic_t a, const char* fn) {
  return checked_enum<rwin::AtomicType>(a, RWIN_ATOMIC_ADD, fn, "rwin_atomic_t");
}
rwin::NotifyOp notify_op(rwin_notify_op_t o, const char* fn) {
  return checked_enum<rwin::NotifyOp>(o, RWIN_NOTIFY_SET, fn, "rwin_notify_op_t");
}
rwin::WaitCmp cmp(rwin_cmp_t c, const char* fn) {
  return checked_enum<rwin::WaitCmp>(c, RWIN_CMP_LE, fn, "rwin_cmp_t");
}
rwin::ReduceOp reduce_op(rwin_reduce_op_t o, const char* fn) {
  return checked_enum<rwin::ReduceOp>(o, RWIN_REDUCE_PROD, fn, "rwin_reduce_op_t");
}

const rwin::Window& window(const rwin_window_t* w, const char* fn, const char* name) {
  return need(w, fn, name)->w;
}
std::optional<std::chrono::milliseconds> timeout(int64_t ms) {
  if (ms < 0) return std::nullopt;
  return std::chrono::milliseconds(ms);
}
std::string text(const char* s) {
  return s ? s : "";
}

}  // namespace rwin_c_api

using namespace rwin_c_api;

extern "C" {

const char* rwin_status_name(rwin_status_t status) {
  switch (status) {
    case RWIN_OK:
      return "RWIN_OK";
    case RWIN_ERR_INVALID_ARGUMENT:
      return "RWIN_ERR_INVALID_ARGUMENT";
    case RWIN_ERR_PEER_OUT_OF_RANGE:
      return "RWIN_ERR_PEER_OUT_OF_RANGE";
    case RWIN_ERR_OUT_OF_BOUNDS:
      return "RWIN_ERR_OUT_OF_BOUNDS";
    case RWIN_ERR_SHAPE_MISMATCH:
      return "RWIN_ERR_SHAPE_MISMATCH";
    case RWIN_ERR_DTYPE_MISMATCH:
      return "RWIN_ERR_DTYPE_MISMATCH";
    case RWIN_ERR_MISALIGNED:
      return "RWIN_ERR_MISALIGNED";
    case RWIN_ERR_WINDOW_MISMATCH:
      return "RWIN_ERR_WINDOW_MISMATCH";
    case RWIN_ERR_USE_AFTER_FREE:
      return "RWIN_ERR_USE_AFTER_FREE";
    case RWIN_ERR_TIMEOUT:
      return "RWIN_ERR_TIMEOUT";
    case RWIN_ERR_PEER_FAILED:
      return "RWIN_ERR_PEER_FAILED";
    case RWIN_ERR_TRANSPORT:
      return "RWIN_ERR_TRANSPORT";
    case RWIN_ERR_BOOTSTRAP:
      return "RWIN_ERR_BOOTSTRAP";
    case RWIN_ERR_UNSUPPORTED:
      return "RWIN_ERR_UNSUPPORTED";
    case RWIN_ERR_COLLECTIVE_MISMATCH:
      return "RWIN_ERR_COLLECTIVE_MISMATCH";
    case RWIN_ERR_NO_MEMORY:
      return "RWIN_ERR_NO_MEMORY";
    case RWIN_ERR_INTERNAL:
      return "RWIN_ERR_INTERNAL";
  }
  return "RWIN_ERR_UNKNOWN";
}

const char* rwin_last_error(void) {
  return last_error.c_str();
}
const char* rwin_version(void) {
  return rwin::version();
}

size_t rwin_dtype_size(rwin_dtype_t d) {
  if (static_cast<int>(d) < 0 || static_cast<int>(d) > static_cast<int>(RWIN_U16)) return 0;
  return rwin::dtype_size(static_cast<rwin::DType>(d));
}

void rwin_options_init(rwin_options_t* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->rank = -1;
  o->nranks = -1;
  o->ib_port = 1;
  o->gid_index = -1;
  o->ucx_tcp_zcopy = -1;
  o->spin_us = -1;
}
}  // extern "C"

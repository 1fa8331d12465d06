// rwin's C ABI (rwin/rwin_c.h; shared helpers in c_api_util.h): collectives over the job.
#include <vector>

#include "c_api_util.h"

using namespace rwin_c_api;

extern "C" {

// ---- collectives over the job

rwin_status_t rwin_allreduce(rwin_context_t* ctx, const rwin_window_t* x, rwin_reduce_op_t op) {
  const char* fn = "rwin_allreduce";
  return guard(fn, [&] { rwin::allreduce(context(ctx, fn), window(x, fn, "x"), reduce_op(op, fn)); });
}
rwin_status_t rwin_allreduce_to(rwin_context_t* ctx, const rwin_window_t* src, const rwin_window_t* dst,
                                rwin_reduce_op_t op) {
  const char* fn = "rwin_allreduce_to";
  return guard(fn, [&] {
    rwin::world(context(ctx, fn)).allreduce(window(src, fn, "src"), window(dst, fn, "dst"), reduce_op(op, fn));
  });
}
rwin_status_t rwin_broadcast(rwin_context_t* ctx, const rwin_window_t* x, int root) {
  const char* fn = "rwin_broadcast";
  return guard(fn, [&] { rwin::broadcast(context(ctx, fn), window(x, fn, "x"), root); });
}
rwin_status_t rwin_allgather(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data) {
  const char* fn = "rwin_allgather";
  return guard(fn, [&] { rwin::allgather(context(ctx, fn), window(stage, fn, "stage"), window(data, fn, "data")); });
}
rwin_status_t rwin_reduce_scatter(rwin_context_t* ctx, const rwin_window_t* data, rwin_reduce_op_t op) {
  const char* fn = "rwin_reduce_scatter";
  return guard(fn, [&] { rwin::reduce_scatter(context(ctx, fn), window(data, fn, "data"), reduce_op(op, fn)); });
}
rwin_status_t rwin_reduce_scatter_to(rwin_context_t* ctx, const rwin_window_t* data, const rwin_window_t* out,
                                     rwin_reduce_op_t op) {
  const char* fn = "rwin_reduce_scatter_to";
  return guard(fn, [&] {
    rwin::world(context(ctx, fn)).reduce_scatter(window(data, fn, "data"), window(out, fn, "out"), reduce_op(op, fn));
  });
}
rwin_status_t rwin_all_to_all(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data) {
  const char* fn = "rwin_all_to_all";
  return guard(fn, [&] { rwin::all_to_all(context(ctx, fn), window(stage, fn, "stage"), window(data, fn, "data")); });
}
}  // extern "C": the helper below returns a C++ type (clang: -Wreturn-type-c-linkage)

namespace {
// all_to_all_v's arguments as the C++ call takes them; packed: both offset arrays NULL.
struct VArgs {
  std::vector<int64_t> sc, so, rc, ro;
  bool packed = false;
};
VArgs v_args(rwin::Context& c, const char* fn, const int64_t* send_counts, const int64_t* send_offsets,
             const int64_t* recv_counts, const int64_t* recv_offsets) {
  const auto n = static_cast<size_t>(c.size());
  const auto vec = [n, fn](const int64_t* p, const char* name) {
    need(p, fn, name);
    return std::vector<int64_t>(p, p + n);
  };
  if ((send_offsets == nullptr) != (recv_offsets == nullptr)) {
    invalid(fn, "send_offsets and recv_offsets are both NULL (packed blocks) or both given");
  }
  VArgs a;
  a.sc = vec(send_counts, "send_counts");
  a.rc = vec(recv_counts, "recv_counts");
  a.packed = send_offsets == nullptr;
  if (!a.packed) {
    a.so = vec(send_offsets, "send_offsets");
    a.ro = vec(recv_offsets, "recv_offsets");
  }
  return a;
}
}  // namespace

extern "C" {

rwin_status_t rwin_all_to_all_v(rwin_context_t* ctx, const rwin_window_t* send, const int64_t* send_counts,
                                const int64_t* send_offsets, const rwin_window_t* recv, const int64_t* recv_counts,
                                const int64_t* recv_offsets) {
  const char* fn = "rwin_all_to_all_v";
  return guard(fn, [&] {
    rwin::Context& c = context(ctx, fn);
    const VArgs a = v_args(c, fn, send_counts, send_offsets, recv_counts, recv_offsets);
    const rwin::Window& s = window(send, fn, "send");
    const rwin::Window& r = window(recv, fn, "recv");
    if (a.packed) {
      rwin::world(c).all_to_all_v(s, a.sc, r, a.rc);
    } else {
      rwin::world(c).all_to_all_v(s, a.sc, a.so, r, a.rc, a.ro);
    }
  });
}
rwin_status_t rwin_barrier_collective(rwin_context_t* ctx) {
  const char* fn = "rwin_barrier_collective";
  return guard(fn, [&] { rwin::barrier_collective(context(ctx, fn)); });
}

// ---- nonblocking forms

rwin_status_t rwin_start_allreduce(rwin_context_t* ctx, const rwin_window_t* x, rwin_reduce_op_t op, rwin_request_t** out) {
  const char* fn = "rwin_start_allreduce";
  return make_handle(fn, out, [&] {
    return rwin::world(context(ctx, fn)).start_allreduce(window(x, fn, "x"), reduce_op(op, fn));
  });
}
rwin_status_t rwin_start_allreduce_to(rwin_context_t* ctx, const rwin_window_t* src, const rwin_window_t* dst,
                                      rwin_reduce_op_t op, rwin_request_t** out) {
  const char* fn = "rwin_start_allreduce_to";
  return make_handle(fn, out, [&] {
    return rwin::world(context(ctx, fn)).start_allreduce(window(src, fn, "src"), window(dst, fn, "dst"), reduce_op(op, fn));
  });
}
rwin_status_t rwin_start_broadcast(rwin_context_t* ctx, const rwin_window_t* x, int root, rwin_request_t** out) {
  const char* fn = "rwin_start_broadcast";
  return make_handle(fn, out, [&] { return rwin::world(context(ctx, fn)).start_broadcast(window(x, fn, "x"), root); });
}
rwin_status_t rwin_start_allgather(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data,
                                   rwin_request_t** out) {
  const char* fn = "rwin_start_allgather";
  return make_handle(fn, out, [&] {
    return rwin::world(context(ctx, fn)).start_allgather(window(stage, fn, "stage"), window(data, fn, "data"));
  });
}
rwin_status_t rwin_start_reduce_scatter(rwin_context_t* ctx, const rwin_window_t* data, rwin_reduce_op_t op,
                                        rwin_request_t** out) {
  const char* fn = "rwin_start_reduce_scatter";
  return make_handle(fn, out, [&] {
    return rwin::world(context(ctx, fn)).start_reduce_scatter(window(data, fn, "data"), reduce_op(op, fn));
  });
}
rwin_status_t rwin_start_reduce_scatter_to(rwin_context_t* ctx, const rwin_window_t* data, const rwin_window_t* o,
                                           rwin_reduce_op_t op, rwin_request_t** out) {
  const char* fn = "rwin_start_reduce_scatter_to";
  return make_handle(fn, out, [&] {
    return rwin::world(context(ctx, fn)).start_reduce_scatter(window(data, fn, "data"), window(o, fn, "out"), reduce_op(op, fn));
  });
}
rwin_status_t rwin_start_all_to_all(rwin_context_t* ctx, const rwin_window_t* stage, const rwin_window_t* data,
                                    rwin_request_t** out) {
  const char* fn = "rwin_start_all_to_all";
  return make_handle(fn, out, [&] {
    return rwin::world(context(ctx, fn)).start_all_to_all(window(stage, fn, "stage"), window(data, fn, "data"));
  });
}
rwin_status_t rwin_start_all_to_all_v(rwin_context_t* ctx, const rwin_window_t* send, const int64_t* send_counts,
                                      const int64_t* send_offsets, const rwin_window_t* recv, const int64_t* recv_counts,
                                      const int64_t* recv_offsets, rwin_request_t** out) {
  const char* fn = "rwin_start_all_to_all_v";
  return make_handle(fn, out, [&] {
    rwin::Context& c = context(ctx, fn);
    const VArgs a = v_args(c, fn, send_counts, send_offsets, recv_counts, recv_offsets);
    const rwin::Window& s = window(send, fn, "send");
    const rwin::Window& r = window(recv, fn, "recv");
    return a.packed ? rwin::world(c).start_all_to_all_v(s, a.sc, r, a.rc)
                    : rwin::world(c).start_all_to_all_v(s, a.sc, a.so, r, a.rc, a.ro);
  });
}
rwin_status_t rwin_start_barrier_collective(rwin_context_t* ctx, rwin_request_t** out) {
  const char* fn = "rwin_start_barrier_collective";
  return make_handle(fn, out, [&] { return rwin::world(context(ctx, fn)).start_barrier(); });
}
rwin_status_t rwin_request_test(rwin_request_t* req, int* done) {
  const char* fn = "rwin_request_test";
  if (done) *done = 0;
  return guard(fn, [&] {
    need(req, fn, "req");
    need(done, fn, "done");
    *done = 1;  // a test that throws reports the finished collective's error
    *done = req->r.test() ? 1 : 0;
  });
}
rwin_status_t rwin_request_wait(rwin_request_t* req) {
  const char* fn = "rwin_request_wait";
  return guard(fn, [&] { need(req, fn, "req")->r.wait(); });
}
void rwin_request_release(rwin_request_t* req) { delete req; }  // an unfinished one waits (CollHandle)

}  // extern "C"

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
rwin_status_t rwin_all_to_all_v(rwin_context_t* ctx, const rwin_window_t* send, const int64_t* send_counts,
                                const int64_t* send_offsets, const rwin_window_t* recv, const int64_t* recv_counts,
                                const int64_t* recv_offsets) {
  const char* fn = "rwin_all_to_all_v";
  return guard(fn, [&] {
    rwin::Context& c = context(ctx, fn);
    const auto n = static_cast<size_t>(c.size());
    const auto vec = [n, fn](const int64_t* p, const char* name) {
      need(p, fn, name);
      return std::vector<int64_t>(p, p + n);
    };
    if ((send_offsets == nullptr) != (recv_offsets == nullptr)) {
      invalid(fn, "send_offsets and recv_offsets are both NULL (packed blocks) or both given");
    }
    const rwin::Window& s = window(send, fn, "send");
    const rwin::Window& r = window(recv, fn, "recv");
    const std::vector<int64_t> sc = vec(send_counts, "send_counts"), rc = vec(recv_counts, "recv_counts");
    if (send_offsets) {
      rwin::world(c).all_to_all_v(s, sc, vec(send_offsets, "send_offsets"), r, rc, vec(recv_offsets, "recv_offsets"));
    } else {
      rwin::world(c).all_to_all_v(s, sc, r, rc);
    }
  });
}
rwin_status_t rwin_barrier_collective(rwin_context_t* ctx) {
  const char* fn = "rwin_barrier_collective";
  return guard(fn, [&] { rwin::barrier_collective(context(ctx, fn)); });
}
}  // extern "C"

// rwin's C ABI (rwin/rwin_c.h; shared helpers in c_api_util.h): agents (run-time peers, their
// regions and data path) and domains.
#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "c_api_util.h"

using namespace rwin_c_api;

namespace {

// Copies `bytes` into the caller's buffer under the rules of rwin_c.h (agents: byte and string results).
void copy_out(const char* fn, const void* bytes, size_t n, void* buf, size_t cap, size_t* len) {
  *need(len, fn, "len") = n;
  if (buf == nullptr && cap == 0) return;  // the size only
  need(buf, fn, "buf");
  if (cap < n) invalid(fn, "a buffer of " + std::to_string(cap) + " bytes, " + std::to_string(n) + " needed");
  std::memcpy(buf, bytes, n);
}
rwin::AgentOptions agent_options(const rwin_agent_options_t* o, const char* fn) {
  rwin::AgentOptions a;
  if (o != nullptr) {
    if (o->struct_size < sizeof(rwin_agent_options_t)) {
      invalid(fn, "opts->struct_size " + std::to_string(o->struct_size) +
                      " is below sizeof(rwin_agent_options_t): call rwin_agent_options_init first");
    }
    if (o->listen) a.listen = o->listen;
    if (o->transport) a.transport = o->transport;
    if (o->ib_device) a.ib_device = o->ib_device;
    if (o->ib_port > 0) a.ib_port = o->ib_port;
    a.gid_index = o->gid_index;
    using Ms = std::chrono::milliseconds;
    if (o->op_timeout_ms > 0) a.op_timeout = Ms(o->op_timeout_ms);
    if (o->connect_timeout_ms > 0) a.connect_timeout = Ms(o->connect_timeout_ms);
    if (o->keepalive_interval_ms > 0) a.keepalive_interval = Ms(o->keepalive_interval_ms);
    if (o->keepalive_timeout_ms > 0) a.keepalive_timeout = Ms(o->keepalive_timeout_ms);
    a.progress_thread = o->progress_thread != 0;
  }
  return a;
}
rwin::Agent& agent(rwin_agent_t* a, const char* fn) {
  need(a, fn, "agent");
  if (!a->a) invalid(fn, "agent is not a live agent");
  return *a->a;
}
const rwin::RemoteRegion& remote(const rwin_remote_region_t* r, const char* fn, const char* name) {
  return need(r, fn, name)->r;
}

rwin::Domain& domain(const rwin_domain_t* d, const char* fn) {
  need(d, fn, "domain");
  if (!d->d) invalid(fn, "domain is not a live domain");
  return *d->d;
}
}  // namespace

extern "C" {

// ---- agents

void rwin_agent_options_init(rwin_agent_options_t* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->ib_port = 1;
  o->gid_index = -1;
}

rwin_status_t rwin_agent_create(const rwin_agent_options_t* o, rwin_agent_t** out) {
  const char* fn = "rwin_agent_create";
  return make_handle<rwin_agent>(fn, out, [&] { return std::make_unique<rwin::Agent>(agent_options(o, fn)); });
}
void rwin_agent_destroy(rwin_agent_t* a) {
  delete a;
}  // ~Agent never throws
rwin_status_t rwin_agent_address(const rwin_agent_t* a, char* buf, size_t cap, size_t* len) {
  const char* fn = "rwin_agent_address";
  return guard(fn, [&] {
    const std::string addr = agent(const_cast<rwin_agent_t*>(a), fn).address();
    copy_out(fn, addr.c_str(), addr.size() + 1, buf, cap, len);
  });
}

rwin_status_t rwin_agent_register(rwin_agent_t* a, void* data, size_t bytes, rwin_region_t** out) {
  const char* fn = "rwin_agent_register";
  return make_handle<rwin_region>(fn, out, [&] { return agent(a, fn).register_memory(need(data, fn, "data"), bytes); });
}
rwin_status_t rwin_region_descriptor(const rwin_region_t* r, void* buf, size_t cap, size_t* len) {
  const char* fn = "rwin_region_descriptor";
  return guard(fn, [&] {
    const std::vector<uint8_t> d = need(r, fn, "region")->r.descriptor();
    copy_out(fn, d.data(), d.size(), buf, cap, len);
  });
}
rwin_status_t rwin_region_deregister(rwin_region_t* r) {
  return guard("rwin_region_deregister", [&] { need(r, "rwin_region_deregister", "region")->r.deregister(); });
}
void rwin_region_release(rwin_region_t* r) {
  delete r;
}

rwin_status_t rwin_agent_import(rwin_agent_t* a, const void* descriptor, size_t len, rwin_remote_region_t** out) {
  const char* fn = "rwin_agent_import";
  return make_handle<rwin_remote_region>(fn, out, [&] {
    const auto* p = static_cast<const uint8_t*>(need(descriptor, fn, "descriptor"));
    return agent(a, fn).import_region(std::span<const uint8_t>(p, len));
  });
}
rwin_status_t rwin_remote_region_bytes(const rwin_remote_region_t* r, size_t* out) {
  const char* fn = "rwin_remote_region_bytes";
  return guard(fn, [&] { *need(out, fn, "out") = remote(r, fn, "region").bytes(); });
}
void rwin_remote_region_release(rwin_remote_region_t* r) {
  delete r;
}

rwin_status_t rwin_agent_put(rwin_agent_t* a, const rwin_remote_region_t* dst, uint64_t offset, const void* src,
                             size_t bytes) {
  const char* fn = "rwin_agent_put";
  return guard(fn, [&] { agent(a, fn).put(remote(dst, fn, "dst"), offset, need(src, fn, "src"), bytes); });
}
rwin_status_t rwin_agent_get(rwin_agent_t* a, void* dst, const rwin_remote_region_t* src, uint64_t offset,
                             size_t bytes) {
  const char* fn = "rwin_agent_get";
  return guard(fn, [&] { agent(a, fn).get(need(dst, fn, "dst"), remote(src, fn, "src"), offset, bytes); });
}
rwin_status_t rwin_agent_put_notify(rwin_agent_t* a, const rwin_remote_region_t* dst, uint64_t offset, const void* src,
                                    size_t bytes, const rwin_remote_region_t* signal, uint64_t signal_offset,
                                    int64_t value, rwin_notify_op_t op) {
  const char* fn = "rwin_agent_put_notify";
  return guard(fn, [&] {
    agent(a, fn).put_notify(remote(dst, fn, "dst"), offset, need(src, fn, "src"), bytes, remote(signal, fn, "signal"),
                            signal_offset, value, notify_op(op, fn));
  });
}
rwin_status_t rwin_agent_notify(rwin_agent_t* a, const rwin_remote_region_t* signal, uint64_t signal_offset,
                                int64_t value, rwin_notify_op_t op) {
  const char* fn = "rwin_agent_notify";
  return guard(fn, [&] { agent(a, fn).notify(remote(signal, fn, "signal"), signal_offset, value, notify_op(op, fn)); });
}
rwin_status_t rwin_agent_flush(rwin_agent_t* a) {
  return guard("rwin_agent_flush", [&] { agent(a, "rwin_agent_flush").flush(); });
}
rwin_status_t rwin_agent_wait(rwin_agent_t* a, const rwin_region_t* signal, uint64_t offset, int64_t expected,
                              rwin_cmp_t c, int64_t timeout_ms) {
  const char* fn = "rwin_agent_wait";
  return guard(
      fn, [&] { agent(a, fn).wait(need(signal, fn, "signal")->r, offset, expected, cmp(c, fn), timeout(timeout_ms)); });
}
rwin_status_t rwin_agent_test(rwin_agent_t* a, const rwin_region_t* signal, uint64_t offset, int64_t expected,
                              rwin_cmp_t c, int* satisfied) {
  const char* fn = "rwin_agent_test";
  return guard(fn, [&] {
    need(satisfied, fn, "satisfied");
    *satisfied = agent(a, fn).test(need(signal, fn, "signal")->r, offset, expected, cmp(c, fn)) ? 1 : 0;
  });
}
rwin_status_t rwin_agent_progress(rwin_agent_t* a) {
  return guard("rwin_agent_progress", [&] { agent(a, "rwin_agent_progress").progress(); });
}

// ---- domains

void rwin_domain_options_init(rwin_domain_options_t* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  rwin_agent_options_init(&o->agent);
  o->agent.progress_thread = 1;
  o->signals = 64;
}
rwin_status_t rwin_domain_prepare(uint64_t id, int rank, int nranks, size_t window_bytes,
                                  const rwin_domain_options_t* o, rwin_domain_t** out) {
  const char* fn = "rwin_domain_prepare";
  return make_handle<rwin_domain>(fn, out, [&] {
    rwin::DomainOptions d;
    if (o != nullptr) {
      if (o->struct_size < sizeof(rwin_domain_options_t)) {
        invalid(fn, "opts->struct_size " + std::to_string(o->struct_size) +
                        " is below sizeof(rwin_domain_options_t): call rwin_domain_options_init first");
      }
      d.agent = agent_options(&o->agent, fn);
      if (o->signals > 0) d.signals = o->signals;
    }
    return std::make_unique<rwin::Domain>(id, rank, nranks, window_bytes, d);
  });
}
void rwin_domain_destroy(rwin_domain_t* d) {
  delete d;  // ~Domain releases; never throws
}
rwin_status_t rwin_domain_descriptor(const rwin_domain_t* d, void* buf, size_t cap, size_t* len) {
  const char* fn = "rwin_domain_descriptor";
  return guard(fn, [&] {
    const std::vector<uint8_t> v = domain(d, fn).descriptor();
    copy_out(fn, v.data(), v.size(), buf, cap, len);
  });
}
rwin_status_t rwin_domain_local(const rwin_domain_t* d, void** window, size_t* window_bytes, int64_t** signals,
                                size_t* nsignals) {
  const char* fn = "rwin_domain_local";
  return guard(fn, [&] {
    rwin::Domain& x = domain(d, fn);
    if (window) *window = x.base();
    if (window_bytes) *window_bytes = x.window_bytes();
    if (signals) *signals = x.signals();
    if (nsignals) *nsignals = x.signal_count();
  });
}
rwin_status_t rwin_domain_state(const rwin_domain_t* d, rwin_domain_state_t* out) {
  const char* fn = "rwin_domain_state";
  return guard(fn, [&] { *need(out, fn, "out") = static_cast<rwin_domain_state_t>(domain(d, fn).state()); });
}
rwin_status_t rwin_domain_import(rwin_domain_t* d, const void* const* descriptors, const size_t* lens, int n) {
  const char* fn = "rwin_domain_import";
  return guard(fn, [&] {
    rwin::Domain& x = domain(d, fn);
    if (n < 0) invalid(fn, "n " + std::to_string(n) + " is negative");
    if (n > 0) {
      need(descriptors, fn, "descriptors");
      need(lens, fn, "lens");
    }
    std::vector<std::vector<uint8_t>> table;
    for (int i = 0; i < n; ++i) {
      if (descriptors[i] == nullptr) invalid(fn, "descriptors[" + std::to_string(i) + "] is NULL");
      const auto* p = static_cast<const uint8_t*>(descriptors[i]);
      table.emplace_back(p, p + lens[i]);
    }
    x.import_table(table);
  });
}
rwin_status_t rwin_domain_commit(rwin_domain_t* d) {
  return guard("rwin_domain_commit", [&] { domain(d, "rwin_domain_commit").commit(); });
}
rwin_status_t rwin_domain_abort(rwin_domain_t* d) {
  return guard("rwin_domain_abort", [&] { domain(d, "rwin_domain_abort").abort(); });
}
rwin_status_t rwin_domain_release(rwin_domain_t* d) {
  return guard("rwin_domain_release", [&] { domain(d, "rwin_domain_release").release(); });
}
rwin_status_t rwin_domain_put(rwin_domain_t* d, int peer, uint64_t offset, const void* src, size_t bytes) {
  const char* fn = "rwin_domain_put";
  return guard(fn, [&] { domain(d, fn).put(peer, offset, need(src, fn, "src"), bytes); });
}
rwin_status_t rwin_domain_get(rwin_domain_t* d, void* dst, int peer, uint64_t offset, size_t bytes) {
  const char* fn = "rwin_domain_get";
  return guard(fn, [&] { domain(d, fn).get(need(dst, fn, "dst"), peer, offset, bytes); });
}
rwin_status_t rwin_domain_put_notify(rwin_domain_t* d, int peer, uint64_t offset, const void* src, size_t bytes,
                                     size_t signal, int64_t value, rwin_notify_op_t op) {
  const char* fn = "rwin_domain_put_notify";
  return guard(fn, [&] { domain(d, fn).put_notify(peer, offset, need(src, fn, "src"), bytes, signal, value, notify_op(op, fn)); });
}
rwin_status_t rwin_domain_notify(rwin_domain_t* d, int peer, size_t signal, int64_t value, rwin_notify_op_t op) {
  const char* fn = "rwin_domain_notify";
  return guard(fn, [&] { domain(d, fn).notify(peer, signal, value, notify_op(op, fn)); });
}
rwin_status_t rwin_domain_flush(rwin_domain_t* d) {
  return guard("rwin_domain_flush", [&] { domain(d, "rwin_domain_flush").flush(); });
}
rwin_status_t rwin_domain_wait(rwin_domain_t* d, size_t signal, int64_t expected, rwin_cmp_t c, int64_t timeout_ms) {
  const char* fn = "rwin_domain_wait";
  return guard(fn, [&] { domain(d, fn).wait(signal, expected, cmp(c, fn), timeout(timeout_ms)); });
}
rwin_status_t rwin_domain_test(rwin_domain_t* d, size_t signal, int64_t expected, rwin_cmp_t c, int* satisfied) {
  const char* fn = "rwin_domain_test";
  return guard(fn, [&] {
    need(satisfied, fn, "satisfied");
    *satisfied = domain(d, fn).test(signal, expected, cmp(c, fn)) ? 1 : 0;
  });
}
rwin_status_t rwin_domain_fail_peer(rwin_domain_t* d, int peer, const char* reason) {
  const char* fn = "rwin_domain_fail_peer";
  return guard(fn, [&] { domain(d, fn).fail_peer(peer, text(reason)); });
}

}  // extern "C"

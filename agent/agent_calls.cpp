// The agent's public calls (rwin/agent.h): the Region and RemoteRegion handles and the Agent
// member functions, each a thin wrapper (call lock, trace span, counters) around AgentImpl.
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "agent/agent_impl.h"

namespace rwin {

// ---- handles ----------------------------------------------------------------------------------------

void* Region::data() const { return s_ ? s_->data : nullptr; }
size_t Region::bytes() const { return s_ ? s_->bytes : 0; }
std::vector<uint8_t> Region::descriptor() const {
  if (!s_) throw Error(ErrorCode::InvalidArgument, "Region::descriptor: empty Region handle");
  return s_->desc;
}
void Region::deregister() {
  if (!s_) return;
  auto a = s_->agent.lock();
  if (!a) return;
  CallLock lk(*a);
  try {
    a->deregister(*s_);  // counts the deregistration itself (a repeated call is no operation)
  } catch (...) {
    a->counters.error(AgentOp::Deregister);
    throw;
  }
}
bool Region::valid() const {
  if (!s_ || !s_->live) return false;
  auto a = s_->agent.lock();
  return a && !a->closed;
}

size_t RemoteRegion::bytes() const { return s_ ? s_->bytes : 0; }
std::string RemoteRegion::peer() const { return s_ ? s_->peer : std::string(); }
bool RemoteRegion::stale() const { return s_ && s_->stale; }

namespace {

// A public call, counted (AgentStats, the metrics): returned (with its data bytes) or threw. `peer`:
// the region the call reached (put, get, put_notify's data, notify), counted by its owner too.
template <class F>
auto counted(AgentImpl& a, AgentOp op, uint64_t bytes, F&& f, const RemoteRegion* peer = nullptr) -> decltype(f()) {
  try {
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      a.counters.op(op, bytes);
      if (peer && !peer->peer().empty()) a.counters.peer_op(peer->peer(), op, bytes);
    } else {
      auto r = f();
      a.counters.op(op, bytes);
      return r;
    }
  } catch (...) {
    a.counters.error(op);
    throw;
  }
}

}  // namespace

Agent::Agent(const AgentOptions& opt) : impl_(std::make_shared<AgentImpl>(opt)) { impl_->start(); }
Agent::~Agent() {
  if (impl_) impl_->close();
}
std::string Agent::address() const { return impl_->address; }
std::string Agent::describe() const { return impl_->describe; }
std::string Agent::metrics_address() const { return impl_->metrics ? impl_->metrics->address() : std::string(); }

namespace {

// The timeline span of one agent call (RWIN_TRACE): its name, bytes, the region it reaches ("region 0
// generation 1 of agent 127.0.0.1:40123" at offset N) and whether it threw.
struct AgentSpan {
  detail::TraceSpan span;
  AgentSpan(AgentImpl& a, const char* name, uint64_t bytes, const RemoteRegionState* r = nullptr, uint64_t off = 0)
      : span(a.trace.get(), name, "agent", -1, bytes) {
    if (span.on() && r) span.detail(a.region_name(*r) + " at offset " + std::to_string(off));
  }
};

}  // namespace

Region Agent::register_memory(void* data, size_t bytes) {
  CallLock lk(*impl_);
  AgentSpan span(*impl_, "register", bytes);
  return counted(*impl_, AgentOp::Register, 0, [&] { return impl_->register_memory(data, bytes); });
}
RemoteRegion Agent::import_region(std::span<const uint8_t> descriptor) {
  CallLock lk(*impl_);
  AgentSpan span(*impl_, "import", 0);  // a first import connects to the owner: its set-up shows here
  return counted(*impl_, AgentOp::Import, 0, [&] { return impl_->import_region(descriptor); });
}
void Agent::put(const RemoteRegion& dst, uint64_t offset, const void* src, size_t bytes) {
  CallLock lk(*impl_);
  AgentSpan span(*impl_, "put", bytes, dst.s_.get(), offset);
  counted(*impl_, AgentOp::Put, bytes, [&] { impl_->put(dst, offset, src, bytes); }, &dst);
}
void Agent::get(void* dst, const RemoteRegion& src, uint64_t offset, size_t bytes) {
  CallLock lk(*impl_);
  AgentSpan span(*impl_, "get", bytes, src.s_.get(), offset);
  counted(*impl_, AgentOp::Get, bytes, [&] { impl_->get(dst, src, offset, bytes); }, &src);
}
void Agent::put_notify(const RemoteRegion& dst, uint64_t offset, const void* src, size_t bytes,
                       const RemoteRegion& signal, uint64_t signal_offset, int64_t value, NotifyOp op) {
  CallLock lk(*impl_);
  AgentImpl& a = *impl_;
  AgentSpan span(a, "put_notify", bytes, dst.s_.get(), offset);
  counted(a, AgentOp::PutNotify, bytes, [&] {
    // Both checked before anything is sent: a bad signal must not leave the data half announced.
    RemoteRegionState& d = a.use(dst, "put_notify (data)", offset, bytes);
    RemoteRegionState& s = a.use(signal, "put_notify (signal)", signal_offset, 8);
    if ((s.base + signal_offset) % 8 != 0) {
      a.fail(ErrorCode::Misaligned, "put_notify: the signal word at offset " + std::to_string(signal_offset) + " of " +
                                        a.region_name(s) + " is not 8-byte aligned");
    }
    a.put(dst, offset, src, bytes);
    // Data, then signal: the transport orders an atomic after writes to the same peer only where
    // write_then_atomic_ordered says so; otherwise (or for a signal at another peer) a Flush between.
    Conn& dc = a.conn_of(d);
    Conn& sc = a.conn_of(s);
    if (bytes > 0 && (&dc != &sc || !a.tr->write_then_atomic_ordered(dc.tpeer))) {
      a.flush_conn(dc, "put_notify: flush of the data into " + a.region_name(d));
    }
    a.notify(signal, signal_offset, value, op);
  }, &dst);
}
void Agent::notify(const RemoteRegion& signal, uint64_t signal_offset, int64_t value, NotifyOp op) {
  CallLock lk(*impl_);
  AgentSpan span(*impl_, op == NotifyOp::Set ? "notify(Set)" : "notify", 0, signal.s_.get(), signal_offset);
  counted(*impl_, AgentOp::Notify, 0, [&] { impl_->notify(signal, signal_offset, value, op); }, &signal);
}
void Agent::flush() {
  CallLock lk(*impl_);
  AgentSpan span(*impl_, "flush", 0);
  counted(*impl_, AgentOp::Flush, 0, [&] { impl_->flush(); });
}
void Agent::wait(const Region& signal, uint64_t offset, int64_t expected, WaitCmp cmp,
                 std::optional<std::chrono::milliseconds> timeout) {
  CallLock lk(*impl_);
  AgentSpan span(*impl_, "wait", 0);
  if (span.span.on()) {
    span.span.event().cmp = to_string(cmp);
    span.span.event().expected = expected;
    span.span.detail("own region at offset " + std::to_string(offset));
  }
  counted(*impl_, AgentOp::Wait, 0,
          [&] { impl_->wait(signal, offset, expected, cmp, timeout.value_or(impl_->opt.op_timeout)); });
}
bool Agent::test(const Region& signal, uint64_t offset, int64_t expected, WaitCmp cmp) {
  CallLock lk(*impl_);
  AgentSpan span(*impl_, "test", 0);
  if (span.span.on()) {
    span.span.event().cmp = to_string(cmp);
    span.span.event().expected = expected;
  }
  return counted(*impl_, AgentOp::Test, 0, [&] {
    impl_->progress_once(false);
    return impl_->check(signal, offset, expected, cmp, "test");
  });
}
// Lock-free: the counters are atomics (a stats() call never waits behind a blocking call).
AgentStats Agent::stats() const {
  const AgentCounters& c = impl_->counters;
  const auto ops = [&](AgentOp o) { return AgentCounters::get(c.ops[static_cast<size_t>(o)]); };
  const auto bytes = [&](AgentOp o) { return AgentCounters::get(c.bytes[static_cast<size_t>(o)]); };
  AgentStats s;
  s.thread_rounds = AgentCounters::get(c.rounds);
  s.thread_sleeps = AgentCounters::get(c.sleeps);
  s.thread_timer_sleeps = AgentCounters::get(c.timer_sleeps);
  s.reg_cache_hits = AgentCounters::get(c.reg_cache_hits);
  s.reg_cache_misses = AgentCounters::get(c.reg_cache_misses);
  s.puts = ops(AgentOp::Put);
  s.put_bytes = bytes(AgentOp::Put);
  s.gets = ops(AgentOp::Get);
  s.get_bytes = bytes(AgentOp::Get);
  s.put_notifies = ops(AgentOp::PutNotify);
  s.put_notify_bytes = bytes(AgentOp::PutNotify);
  s.notifies = ops(AgentOp::Notify);
  s.flushes = ops(AgentOp::Flush);
  s.waits = ops(AgentOp::Wait);
  s.tests = ops(AgentOp::Test);
  for (const auto& e : c.errors) s.errors += AgentCounters::get(e);
  s.regions_registered = ops(AgentOp::Register);
  s.regions_deregistered = ops(AgentOp::Deregister);
  s.regions = static_cast<uint64_t>(std::max<int64_t>(0, c.regions.load(std::memory_order_relaxed)));
  s.imports = ops(AgentOp::Import);
  for (size_t d = 0; d < 2; ++d) {
    s.peers_connected += AgentCounters::get(c.connected[d]);
    s.peer_failures += AgentCounters::get(c.failures[d]);
    s.peer_closes += AgentCounters::get(c.closes[d]);
    s.peers += static_cast<uint64_t>(std::max<int64_t>(0, c.peers[d].load(std::memory_order_relaxed)));
  }
  s.refused = AgentCounters::get(c.refused);
  return s;
}

std::string Agent::peer_error(const RemoteRegion& r) const {
  if (!r.s_) return "empty RemoteRegion handle";
  CallLock lk(*impl_);
  AgentImpl& a = *impl_;
  if (a.closed) return "the agent is closed";
  const RemoteRegionState& st = *r.s_;
  if (st.agent.lock().get() != &a) return a.region_name(st) + " was imported by another agent";
  if (st.stale) return a.region_name(st) + " was deregistered by its owner (stale)";
  auto it = a.conns.find(st.conn);
  if (it == a.conns.end()) return a.region_name(st) + ": its connection is closed";
  const Conn& c = *it->second;
  if (c.state == Conn::State::Failed) return "peer agent " + c.label + " failed: " + c.error;
  return {};
}

void Agent::fail_peer(const RemoteRegion& r, const std::string& why) {
  CallLock lk(*impl_);
  AgentImpl& a = *impl_;
  if (a.closed || !r.s_ || r.s_->agent.lock().get() != &a) return;
  const std::string peer = r.s_->peer;
  for (auto& [id, c] : a.conns) {
    if (c->label == peer) a.fail_conn(*c, "failed by the caller: " + why);
  }
}

void Agent::progress() {
  CallLock lk(*impl_);
  if (!impl_->closed) impl_->progress_once(false);
}

}  // namespace rwin

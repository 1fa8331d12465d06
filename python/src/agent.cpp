// rwin._rwin agents (issue 15): rwin.Agent, rwin.Region and rwin.RemoteRegion over rwin/agent.h.
//
//   agent = rwin.Agent(listen="127.0.0.1:0"); agent.address
//   region = agent.register(array)              # any writable C-contiguous buffer, no copy
//   remote = agent.import_region(region.descriptor())
//   agent.put(remote, offset, array); agent.get(array, remote, offset); agent.flush()
//   agent.put_notify(remote, offset, array, signal_remote, signal_offset, value)
//   agent.wait(signal_region, offset, expected, cmp=rwin.WaitCmp.Ge, timeout=None)
//
// Design notes:
// - rwin::Agent serialises its own calls and may be called from any thread, so the binding adds no
//   mutex: every call that can block (or talk to a peer) releases the GIL and goes straight in.
// - A Region holds the Python buffer it registered (Py_buffer: the exporter stays alive and, for a
//   bytearray, unresizable) until it is deregistered; a Region collected while still registered is
//   deregistered first, so no peer ever writes into memory Python has freed.
// - Region and RemoteRegion keep their Agent object alive and are checked against the agent they are
//   used with (a handle of another agent is refused by name, not sent to a random peer).
// - Fork: an Agent used in another process than the one it was made in raises ForkedContextError's
//   base (InvalidArgumentError) naming both pids; collecting it there leaks it on purpose (its
//   destructor would close the parent's connections).
#include <pthread.h>

#include <cmath>
#include <cstring>

#include "agent_args.h"
#include "binding.h"
#include "rwin/agent.h"

namespace rwin_py {

namespace {

using std::chrono::milliseconds;

struct PyAgent {
  // Shared with every call in flight: a call copies it before releasing the GIL, so close() (or
  // collection) from another thread never destroys the Agent under a running call; the last owner
  // destroys it.
  std::shared_ptr<rwin::Agent> a;
  pid_t pid = 0;
  uint64_t gen = 0;
  std::string name;       // describe(), kept for messages after close()
  std::string transport;  // as asked

  bool forked() const noexcept { return gen != g_fork_gen.load(std::memory_order_relaxed); }
  std::shared_ptr<rwin::Agent> live(const char* what) const {
    if (forked()) {
      throw ForkedError(ErrorCode::InvalidArgument,
                        std::string("Agent.") + what + ": " + name + " was created in process " + std::to_string(pid) +
                            " and is used in process " + std::to_string(getpid()) +
                            " after os.fork(); an Agent does not cross fork: create a new rwin.Agent in the child");
    }
    if (!a) fail(ErrorCode::UseAfterFree, std::string("Agent.") + what + ": " + name + " is closed");
    return a;
  }
  void close() {
    if (forked()) {
      leak();  // never tear down the parent's connections from a child
      return;
    }
    std::shared_ptr<rwin::Agent> tmp = std::move(a);
    py::gil_scoped_release nogil;
    tmp.reset();
  }
  void leak() {
    if (a) new std::shared_ptr<rwin::Agent>(std::move(a));  // on purpose: its destructor never runs here
  }
  ~PyAgent() {
    if (forked()) {
      leak();
      return;
    }
    if (!a) return;
    if (_Py_IsFinalizing()) {
      a.reset();
    } else {
      py::gil_scoped_release nogil;
      a.reset();
    }
  }
};

struct PyRegion {
  rwin::Region r;
  std::unique_ptr<Buffer> buf;  // the registered memory's exporter, held while registered
  py::object obj;               // the object registered (Region.array)
  py::object agent;             // the PyAgent
  size_t nbytes = 0;
  bool int64 = false;
  std::string format;

  PyAgent& owner() const { return agent.cast<PyAgent&>(); }
  bool registered() const { return buf != nullptr; }
  void deregister() {  // GIL held
    if (!buf) return;
    {
      py::gil_scoped_release nogil;
      r.deregister();  // no peer operation reaches the memory after this
    }
    buf.reset();
  }
  ~PyRegion() {
    if (!buf) return;
    try {
      if (owner().forked()) {
        (void)buf.release();  // the parent's registration: leave it alone
        return;
      }
      if (_Py_IsFinalizing()) {
        r.deregister();
      } else {
        py::gil_scoped_release nogil;
        r.deregister();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rwin: deregistering a collected Region: %s\n", e.what());
    }
    buf.reset();
  }
};

struct PyRemote {
  rwin::RemoteRegion r;
  py::object agent;
};

PyAgent& same_agent(PyAgent& self, py::object owner, const char* what, const char* arg, const char* kind) {
  PyAgent& o = owner.cast<PyAgent&>();
  if (&o != &self) {
    fail(ErrorCode::InvalidArgument, std::string("Agent.") + what + ": " + arg + " is a " + kind + " of " + o.name +
                                         ", not of " + self.name + " (use it with the agent that " +
                                         (std::strcmp(kind, "Region") == 0 ? "registered" : "imported") + " it)");
  }
  return o;
}

const rwin::RemoteRegion& remote_of(PyAgent& self, py::handle h, const char* what, const char* arg) {
  py::detail::make_caster<PyRemote> c;
  if (!c.load(h, false)) {
    fail(ErrorCode::InvalidArgument, std::string("Agent.") + what + ": " + arg +
                                         " must be an rwin.RemoteRegion (from agent.import_region(descriptor)), got " +
                                         type_name(h));
  }
  PyRemote& r = py::detail::cast_op<PyRemote&>(c);
  same_agent(self, r.agent, what, arg, "RemoteRegion");
  return r.r;
}

PyRegion& region_of(PyAgent& self, py::handle h, const char* what, const char* arg) {
  py::detail::make_caster<PyRegion> c;
  if (!c.load(h, false)) {
    fail(ErrorCode::InvalidArgument, std::string("Agent.") + what + ": " + arg +
                                         " must be an rwin.Region (from agent.register(array)), got " + type_name(h));
  }
  PyRegion& r = py::detail::cast_op<PyRegion&>(c);
  same_agent(self, r.agent, what, arg, "Region");
  return r;
}

uint64_t offset_arg(int64_t off, const char* what, const char* arg) {
  if (off < 0) fail(ErrorCode::OutOfBounds, std::string("Agent.") + what + ": " + arg + " " + std::to_string(off) + " is negative");
  return static_cast<uint64_t>(off);
}

// wait/test: the local region must hold int64 words and the offset name a whole, aligned one.
void check_signal(const PyRegion& r, int64_t off, const char* what) {
  if (!r.registered()) {
    fail(ErrorCode::UseAfterFree, std::string("Agent.") + what + ": the signal region (" + std::to_string(r.nbytes) +
                                      " bytes) was deregistered");
  }
  if (!r.int64) {
    fail(ErrorCode::DtypeMismatch, std::string("Agent.") + what + ": signal words are int64, but the signal region was "
                                       "registered from a buffer of format '" + r.format +
                                       "' (register a numpy int64 array for signals)");
  }
  if (off < 0 || static_cast<uint64_t>(off) + 8 > r.nbytes) {
    fail(ErrorCode::OutOfBounds, std::string("Agent.") + what + ": signal offset " + std::to_string(off) +
                                     " is outside the signal region of " + std::to_string(r.nbytes) + " bytes");
  }
  if (off % 8 != 0) {
    fail(ErrorCode::Misaligned, std::string("Agent.") + what + ": signal offset " + std::to_string(off) +
                                    " is not a multiple of 8 (signal words are aligned int64)");
  }
}


}  // namespace

void bind_agent(py::module_& m) {
  py::class_<PyRegion>(m, "Region",
                       "Local memory registered with an rwin.Agent (agent.register(array)). Holds the array (no copy) "
                       "until deregister(); collected while registered, it is deregistered first.")
      .def_property_readonly("nbytes", [](const PyRegion& r) { return r.nbytes; })
      .def_property_readonly("array", [](const PyRegion& r) { return r.obj; }, "the object registered")
      .def_property_readonly("registered", &PyRegion::registered)
      .def_property_readonly("valid", [](const PyRegion& r) { return r.registered() && r.r.valid(); },
                             "registered and its agent open")
      .def("descriptor",
           [](const PyRegion& r) {
             if (!r.registered()) {
               fail(ErrorCode::UseAfterFree, "Region.descriptor: the region (" + std::to_string(r.nbytes) + " bytes of " +
                                                 r.owner().name + ") was deregistered");
             }
             const std::vector<uint8_t> d = r.r.descriptor();
             return py::bytes(reinterpret_cast<const char*>(d.data()), d.size());
           },
           "versioned bytes (transport address, key, length, generation) for the peer's agent.import_region()")
      .def("deregister", &PyRegion::deregister,
           "revoke the region: importers' later uses fail naming it, no peer operation reaches the memory after "
           "this returns; releases the array. Idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyRegion& r, py::args) { r.deregister(); })
      .def("__repr__", [](const PyRegion& r) {
        return "<rwin.Region " + std::to_string(r.nbytes) + " bytes of " + r.owner().name +
               (r.registered() ? ">" : ", deregistered>");
      });

  py::class_<PyRemote>(m, "RemoteRegion", "A region of another agent (or this one), from agent.import_region(descriptor).")
      .def_property_readonly("nbytes", [](const PyRemote& r) { return r.r.bytes(); })
      .def_property_readonly("peer", [](const PyRemote& r) { return r.r.peer(); }, "the owning agent's address")
      .def_property_readonly("stale", [](const PyRemote& r) { return r.r.stale(); },
                             "the owner deregistered it (as learned from the owner)")
      .def("__repr__", [](const PyRemote& r) {
        return "<rwin.RemoteRegion " + std::to_string(r.r.bytes()) + " bytes of agent " + r.r.peer() +
               (r.r.stale() ? ", stale>" : ">");
      });

  py::class_<PyAgent>(m, "Agent",
                      "A peer that meets others at run time: listens on an address, registers memory, imports regions\n"
                      "from descriptors and puts/gets/notifies into them. Every blocking call releases the GIL; calls\n"
                      "from several threads are serialised by the agent. progress_thread=True serves peers while this\n"
                      "process is elsewhere (asleep, blocked in another library). Timeouts in seconds.")
      .def(py::init([](const std::string& listen, const std::string& transport, bool progress_thread, py::object op_timeout,
                       py::object connect_timeout, py::object keepalive_interval, py::object keepalive_timeout,
                       py::object ib_device, int ib_port, int gid_index, py::object metrics, py::object metrics_interval) {
             rwin::AgentOptions o;
             o.listen = listen;
             o.transport = transport;
             o.progress_thread = progress_thread;
             if (!op_timeout.is_none()) o.op_timeout = seconds_arg(op_timeout, "rwin.Agent: op_timeout");
             if (!connect_timeout.is_none()) o.connect_timeout = seconds_arg(connect_timeout, "rwin.Agent: connect_timeout");
             if (!keepalive_interval.is_none()) o.keepalive_interval = seconds_arg(keepalive_interval, "rwin.Agent: keepalive_interval");
             if (!keepalive_timeout.is_none()) o.keepalive_timeout = seconds_arg(keepalive_timeout, "rwin.Agent: keepalive_timeout");
             if (!ib_device.is_none()) o.ib_device = ib_device.cast<std::string>();
             o.ib_port = ib_port;
             o.gid_index = gid_index;
             if (!metrics.is_none()) o.metrics = metrics.cast<std::string>();
             if (!metrics_interval.is_none()) o.metrics_interval = seconds_arg(metrics_interval, "rwin.Agent: metrics_interval");
             auto pa = std::make_unique<PyAgent>();
             pa->pid = getpid();
             pa->gen = g_fork_gen.load(std::memory_order_relaxed);
             pa->transport = transport;
             {
               py::gil_scoped_release nogil;
               pa->a = std::make_shared<rwin::Agent>(o);
               pa->name = pa->a->describe();
             }
             return pa;
           }),
           py::arg("listen") = "127.0.0.1:0", py::kw_only(), py::arg("transport") = "ucx",
           py::arg("progress_thread") = false, py::arg("op_timeout") = py::none(), py::arg("connect_timeout") = py::none(),
           py::arg("keepalive_interval") = py::none(), py::arg("keepalive_timeout") = py::none(),
           py::arg("ib_device") = py::none(), py::arg("ib_port") = 1, py::arg("gid_index") = -1,
           py::arg("metrics") = py::none(), py::arg("metrics_interval") = py::none())
      .def_property_readonly("address", [](const PyAgent& a) { return a.live("address")->address(); },
                             "the bound control address, \"host:port\"")
      .def_property_readonly("metrics_address", [](const PyAgent& a) { return a.live("metrics_address")->metrics_address(); },
                             "where the Prometheus metrics are (metrics= or RWIN_METRICS): the bound \"host:port\" of\n"
                             "the HTTP endpoint (GET /metrics), \"file:PATH\", or \"\" when off")
      .def_property_readonly("transport", [](const PyAgent& a) { return a.transport; })
      .def_property_readonly("closed", [](const PyAgent& a) { return !a.a; })
      .def("describe", [](const PyAgent& a) { return a.name; })
      .def("close", &PyAgent::close, "close every connection; regions and remote regions then fail on use")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyAgent& a, py::args) { a.close(); })
      .def("__repr__", [](const PyAgent& a) { return "<rwin.Agent " + a.name + (a.a ? ">" : ", closed>"); })
      .def("register",
           [](py::object self, py::object array) {
             PyAgent& pa = self.cast<PyAgent&>();
             const std::shared_ptr<rwin::Agent> ag = pa.live("register");
             auto r = std::make_unique<PyRegion>();
             r->buf = std::make_unique<Buffer>(array, true, "Agent.register: array");
             r->nbytes = r->buf->bytes();
             if (r->nbytes == 0) fail(ErrorCode::InvalidArgument, "Agent.register: array is empty (0 bytes); a region needs at least 1 byte");
             r->int64 = r->buf->is_int64();
             r->format = r->buf->format();
             r->obj = array;
             r->agent = self;
             void* p = r->buf->data();
             const size_t n = r->nbytes;
             {
               py::gil_scoped_release nogil;
               r->r = ag->register_memory(p, n);
             }
             return r;
           },
           py::arg("array"),
           "register(array) -> Region: any writable C-contiguous buffer (numpy array, bytearray), no copy")
      .def("import_region",
           [](py::object self, py::buffer desc) {
             PyAgent& pa = self.cast<PyAgent&>();
             const std::shared_ptr<rwin::Agent> ag = pa.live("import_region");
             Buffer b(desc, false, "Agent.import_region: descriptor");
             std::span<const uint8_t> d(static_cast<const uint8_t*>(b.data()), b.bytes());
             auto r = std::make_unique<PyRemote>();
             {
               py::gil_scoped_release nogil;
               r->r = ag->import_region(d);  // connects on first use
             }
             r->agent = self;
             return r;
           },
           py::arg("descriptor"), "import_region(descriptor: bytes) -> RemoteRegion (connects to the owner on first use)")
      .def("put",
           [](PyAgent& pa, py::handle remote, int64_t offset, py::handle array) {
             const std::shared_ptr<rwin::Agent> ag = pa.live("put");
             const rwin::RemoteRegion& dst = remote_of(pa, remote, "put", "remote");
             const uint64_t off = offset_arg(offset, "put", "offset");
             Buffer b(array, false, "Agent.put: array");
             py::gil_scoped_release nogil;
             ag->put(dst, off, b.data(), b.bytes());
           },
           py::arg("remote"), py::arg("offset"), py::arg("array"),
           "put(remote, offset, array): bytes of array to byte `offset` of remote; returns when array may be reused, "
           "visible at the target after flush() or to a waiter of a later notify's signal")
      .def("get",
           [](PyAgent& pa, py::handle array, py::handle remote, int64_t offset) {
             const std::shared_ptr<rwin::Agent> ag = pa.live("get");
             const rwin::RemoteRegion& src = remote_of(pa, remote, "get", "remote");
             const uint64_t off = offset_arg(offset, "get", "offset");
             Buffer b(array, true, "Agent.get: array");
             py::gil_scoped_release nogil;
             ag->get(b.data(), src, off, b.bytes());
           },
           py::arg("array"), py::arg("remote"), py::arg("offset"),
           "get(array, remote, offset): fill array from byte `offset` of remote; returns when the data is there")
      .def("put_notify",
           [](PyAgent& pa, py::handle remote, int64_t offset, py::handle array, py::handle signal_remote,
              int64_t signal_offset, int64_t value, py::handle op) {
             const std::shared_ptr<rwin::Agent> ag = pa.live("put_notify");
             const rwin::RemoteRegion& dst = remote_of(pa, remote, "put_notify", "remote");
             const rwin::RemoteRegion& sig = remote_of(pa, signal_remote, "put_notify", "signal_remote");
             const uint64_t off = offset_arg(offset, "put_notify", "offset");
             const uint64_t soff = offset_arg(signal_offset, "put_notify", "signal_offset");
             const rwin::NotifyOp o = op_arg(op);
             Buffer b(array, false, "Agent.put_notify: array");
             py::gil_scoped_release nogil;
             ag->put_notify(dst, off, b.data(), b.bytes(), sig, soff, value, o);
           },
           py::arg("remote"), py::arg("offset"), py::arg("array"), py::arg("signal_remote"), py::arg("signal_offset"),
           py::arg("value") = 1, py::arg("op") = rwin::NotifyOp::AtomicAdd,
           "put_notify(remote, offset, array, signal_remote, signal_offset, value=1, op=NotifyOp.AtomicAdd): the data, "
           "then the int64 signal word (ordered: a waiter that sees the signal sees the data)")
      .def("notify",
           [](PyAgent& pa, py::handle signal_remote, int64_t signal_offset, int64_t value, py::handle op) {
             const std::shared_ptr<rwin::Agent> ag = pa.live("notify");
             const rwin::RemoteRegion& sig = remote_of(pa, signal_remote, "notify", "signal_remote");
             const uint64_t soff = offset_arg(signal_offset, "notify", "signal_offset");
             const rwin::NotifyOp o = op_arg(op);
             py::gil_scoped_release nogil;
             ag->notify(sig, soff, value, o);
           },
           py::arg("signal_remote"), py::arg("signal_offset"), py::arg("value") = 1, py::arg("op") = rwin::NotifyOp::AtomicAdd,
           "notify(signal_remote, signal_offset, value=1, op=NotifyOp.AtomicAdd): update a remote int64 signal word "
           "after this agent's earlier puts to that peer")
      .def("flush",
           [](PyAgent& pa) {
             const std::shared_ptr<rwin::Agent> ag = pa.live("flush");
             py::gil_scoped_release nogil;
             ag->flush();
           },
           "every put and notify this agent issued is complete at its target")
      .def("wait",
           [](PyAgent& pa, py::handle region, int64_t offset, int64_t expected, py::handle cmp, py::handle timeout) {
             const std::shared_ptr<rwin::Agent> ag = pa.live("wait");
             PyRegion& r = region_of(pa, region, "wait", "signal region");
             check_signal(r, offset, "wait");
             const rwin::WaitCmp c = cmp_arg(cmp);
             const auto t = to_timeout(timeout);
             const rwin::Region reg = r.r;
             py::gil_scoped_release nogil;
             ag->wait(reg, static_cast<uint64_t>(offset), expected, c, t);
           },
           py::arg("region"), py::arg("offset"), py::arg("expected"), py::arg("cmp") = rwin::WaitCmp::GE,
           py::arg("timeout") = py::none(),
           "wait(region, offset, expected, cmp=WaitCmp.Ge, timeout=None): block (GIL released) until the local int64 "
           "word at byte `offset` of region satisfies cmp expected; timeout in seconds (None: the agent's op_timeout), "
           "rwin.TimeoutError past it")
      .def("test",
           [](PyAgent& pa, py::handle region, int64_t offset, int64_t expected, py::handle cmp) {
             const std::shared_ptr<rwin::Agent> ag = pa.live("test");
             PyRegion& r = region_of(pa, region, "test", "signal region");
             check_signal(r, offset, "test");
             const rwin::WaitCmp c = cmp_arg(cmp);
             const rwin::Region reg = r.r;
             py::gil_scoped_release nogil;
             return ag->test(reg, static_cast<uint64_t>(offset), expected, c);
           },
           py::arg("region"), py::arg("offset"), py::arg("expected"), py::arg("cmp") = rwin::WaitCmp::GE,
           "test(region, offset, expected, cmp=WaitCmp.Ge) -> bool: wait's question without blocking")
      .def("progress",
           [](PyAgent& pa) {
             const std::shared_ptr<rwin::Agent> ag = pa.live("progress");
             py::gil_scoped_release nogil;
             ag->progress();
           },
           "drive progress once (serve peers, keepalives) without blocking")
      .def("stats",
           [](const PyAgent& pa) {
             const rwin::AgentStats st = pa.live("stats")->stats();
             py::dict d;
             d["thread_rounds"] = st.thread_rounds;
             d["thread_sleeps"] = st.thread_sleeps;
             d["thread_timer_sleeps"] = st.thread_timer_sleeps;
             d["reg_cache_hits"] = st.reg_cache_hits;
             d["reg_cache_misses"] = st.reg_cache_misses;
             d["puts"] = st.puts;
             d["put_bytes"] = st.put_bytes;
             d["gets"] = st.gets;
             d["get_bytes"] = st.get_bytes;
             d["put_notifies"] = st.put_notifies;
             d["put_notify_bytes"] = st.put_notify_bytes;
             d["notifies"] = st.notifies;
             d["flushes"] = st.flushes;
             d["waits"] = st.waits;
             d["tests"] = st.tests;
             d["errors"] = st.errors;
             d["regions_registered"] = st.regions_registered;
             d["regions_deregistered"] = st.regions_deregistered;
             d["regions"] = st.regions;
             d["imports"] = st.imports;
             d["peers_connected"] = st.peers_connected;
             d["peer_failures"] = st.peer_failures;
             d["peer_closes"] = st.peer_closes;
             d["peers"] = st.peers;
             d["refused"] = st.refused;
             return d;
           },
           "the agent's counters (rwin::AgentStats): the progress thread's rounds and sleeps, calls and bytes by\n"
           "operation, errors, regions, imports, peer connections; the same as its Prometheus metrics");
}

}  // namespace rwin_py

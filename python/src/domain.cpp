// rwin._rwin domains (issue 25 item 5): rwin.Domain over rwin/domain.h, the prepare / import /
// commit flow whose descriptors the caller carries in its own frames.
//   d = rwin.Domain(id, rank, nranks, window_bytes, signals=64)   # prepare
//   d.descriptor() -> bytes          (<= rwin.Domain.MAX_DESCRIPTOR_BYTES)
//   d.import_table([bytes, ...]); d.commit()   # or d.abort()
//   d.window(numpy.float32) -> a numpy view of the local window (no copy); d.signals -> int64 view
//   d.put / get / put_notify / notify / flush / wait / test; d.fail_peer(rank, reason); d.release()
// Like rwin.Agent: blocking calls release the GIL; a call copies the shared_ptr first, so release()
// or collection from another thread never destroys the Domain under a running call; numpy views
// keep the Domain object (and so its memory, which release() does not unmap) alive. A Domain does
// not cross fork.
#include "agent_args.h"
#include "binding.h"
#include "rwin/domain.h"

namespace rwin_py {

namespace {

struct PyDomain {
  std::shared_ptr<rwin::Domain> d;
  pid_t pid = 0;
  uint64_t gen = 0;
  std::string name;

  bool forked() const noexcept { return gen != g_fork_gen.load(std::memory_order_relaxed); }
  std::shared_ptr<rwin::Domain> live(const char* what) const {
    if (forked()) {
      throw ForkedError(ErrorCode::InvalidArgument,
                        std::string("Domain.") + what + ": " + name + " was prepared in process " + std::to_string(pid) +
                            " and is used in process " + std::to_string(getpid()) +
                            " after os.fork(); a Domain does not cross fork: fork the workers first, then prepare");
    }
    return d;
  }
  ~PyDomain() {
    if (forked()) {
      if (d) new std::shared_ptr<rwin::Domain>(std::move(d));  // on purpose: never tear down the parent's
      return;
    }
    if (!d) return;
    if (_Py_IsFinalizing()) {
      d.reset();
    } else {
      py::gil_scoped_release nogil;
      d.reset();
    }
  }
};

uint64_t nonneg(int64_t v, const char* what) {
  if (v < 0) fail(ErrorCode::OutOfBounds, std::string("Domain.") + what + " " + std::to_string(v) + " is negative");
  return static_cast<uint64_t>(v);
}

const char* state_text(rwin::Domain::State s) {
  switch (s) {
    case rwin::Domain::State::Prepared: return "prepared";
    case rwin::Domain::State::Imported: return "imported";
    case rwin::Domain::State::Committed: return "committed";
    case rwin::Domain::State::Released: return "released";
  }
  return "?";
}

}  // namespace

void bind_domain(py::module_& m) {
  py::class_<PyDomain>(m, "Domain",
                       "A communication domain the caller wires up (prepare -> import_table -> commit / abort -> release):\n"
                       "a window of window_bytes plus `signals` int64 words per rank, one descriptor per rank that the\n"
                       "caller carries in its own frames. No store, no launcher. Blocking calls release the GIL;\n"
                       "fail_peer may be called from any thread. Timeouts in seconds.")
      .def(py::init([](uint64_t id, int rank, int nranks, int64_t window_bytes, int64_t signals, const std::string& transport,
                       const std::string& listen, bool progress_thread, py::object op_timeout, py::object connect_timeout,
                       py::object keepalive_interval, py::object keepalive_timeout, py::object ib_device, int ib_port,
                       int gid_index) {
             if (window_bytes < 0) fail(ErrorCode::InvalidArgument, "rwin.Domain: window_bytes " + std::to_string(window_bytes) + " is negative");
             if (signals < 0) fail(ErrorCode::InvalidArgument, "rwin.Domain: signals " + std::to_string(signals) + " is negative");
             rwin::DomainOptions o;
             o.signals = static_cast<size_t>(signals);
             o.agent.transport = transport;
             o.agent.listen = listen;
             o.agent.progress_thread = progress_thread;
             if (!op_timeout.is_none()) o.agent.op_timeout = seconds_arg(op_timeout, "rwin.Domain: op_timeout");
             if (!connect_timeout.is_none()) o.agent.connect_timeout = seconds_arg(connect_timeout, "rwin.Domain: connect_timeout");
             if (!keepalive_interval.is_none()) {
               o.agent.keepalive_interval = seconds_arg(keepalive_interval, "rwin.Domain: keepalive_interval");
             }
             if (!keepalive_timeout.is_none()) o.agent.keepalive_timeout = seconds_arg(keepalive_timeout, "rwin.Domain: keepalive_timeout");
             if (!ib_device.is_none()) o.agent.ib_device = ib_device.cast<std::string>();
             o.agent.ib_port = ib_port;
             o.agent.gid_index = gid_index;
             auto pd = std::make_unique<PyDomain>();
             pd->pid = getpid();
             pd->gen = g_fork_gen.load(std::memory_order_relaxed);
             {
               py::gil_scoped_release nogil;
               pd->d = std::make_shared<rwin::Domain>(id, rank, nranks, static_cast<size_t>(window_bytes), o);
             }
             pd->name = pd->d->describe();
             return pd;
           }),
           py::arg("id"), py::arg("rank"), py::arg("nranks"), py::arg("window_bytes"), py::kw_only(), py::arg("signals") = 64,
           py::arg("transport") = "ucx", py::arg("listen") = "127.0.0.1:0", py::arg("progress_thread") = true,
           py::arg("op_timeout") = py::none(), py::arg("connect_timeout") = py::none(),
           py::arg("keepalive_interval") = py::none(), py::arg("keepalive_timeout") = py::none(),
           py::arg("ib_device") = py::none(), py::arg("ib_port") = 1, py::arg("gid_index") = -1)
      .def_property_readonly_static("MAX_DESCRIPTOR_BYTES", [](py::object) { return rwin::Domain::kMaxDescriptorBytes; })
      .def_property_readonly("rank", [](const PyDomain& p) { return p.d->rank(); })
      .def_property_readonly("nranks", [](const PyDomain& p) { return p.d->nranks(); })
      .def_property_readonly("id", [](const PyDomain& p) { return p.d->id(); })
      .def_property_readonly("window_bytes", [](const PyDomain& p) { return p.d->window_bytes(); })
      .def_property_readonly("state", [](const PyDomain& p) { return std::string(state_text(p.d->state())); },
                             "'prepared', 'imported', 'committed' or 'released'")
      .def("describe", [](const PyDomain& p) { return p.name; })
      .def("descriptor",
           [](const PyDomain& p) {
             const std::vector<uint8_t> v = p.live("descriptor")->descriptor();
             return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
           },
           "this rank's descriptor: versioned, checksummed bytes for the caller to carry to every rank")
      .def("window",
           [](py::object self, py::object dtype) {
             PyDomain& p = self.cast<PyDomain&>();
             const auto d = p.live("window");
             const py::dtype dt = py::dtype::from_args(dtype);
             const size_t item = static_cast<size_t>(dt.itemsize());
             if (item == 0 || d->window_bytes() % item != 0) {
               fail(ErrorCode::InvalidArgument, "Domain.window: the window's " + std::to_string(d->window_bytes()) +
                                                    " bytes are not a whole number of " + std::to_string(item) + "-byte elements");
             }
             return py::array(dt, {static_cast<py::ssize_t>(d->window_bytes() / item)}, {static_cast<py::ssize_t>(item)},
                              d->base(), self);
           },
           py::arg("dtype") = py::dtype("uint8"),
           "a numpy view (no copy) of this rank's window; it keeps the Domain object alive")
      .def_property_readonly("signals",
                             [](py::object self) {
                               PyDomain& p = self.cast<PyDomain&>();
                               const auto d = p.live("signals");
                               return py::array_t<int64_t>({static_cast<py::ssize_t>(d->signal_count())}, {8}, d->signals(),
                                                           self);
                             },
                             "a numpy int64 view of this rank's signal words (read them with signal(i) for an atomic load)")
      .def("import_table",
           [](PyDomain& p, const std::vector<py::bytes>& table) {
             const auto d = p.live("import_table");
             std::vector<std::vector<uint8_t>> t;
             for (const auto& b : table) {
               const std::string s = b;
               t.emplace_back(s.begin(), s.end());
             }
             py::gil_scoped_release nogil;
             d->import_table(t);
           },
           py::arg("table"), "every rank's descriptor in rank order; checks the whole table, then connects")
      .def("commit", [](PyDomain& p) { p.live("commit")->commit(); })
      .def("abort", [](PyDomain& p) { p.live("abort")->abort(); }, "drop the imports: back to prepared")
      .def("release",
           [](PyDomain& p) {
             if (p.forked()) return;
             const auto d = p.d;
             py::gil_scoped_release nogil;
             d->release();
           },
           "deregister the window (no peer writes after this returns) and close; views stay readable. Idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyDomain& p, py::args) {
             if (p.forked()) return;
             const auto d = p.d;
             py::gil_scoped_release nogil;
             d->release();
           })
      .def("put",
           [](PyDomain& p, int peer, int64_t offset, py::handle array) {
             const auto d = p.live("put");
             const uint64_t off = nonneg(offset, "put: offset");
             Buffer b(array, false, "Domain.put: array");
             py::gil_scoped_release nogil;
             d->put(peer, off, b.data(), b.bytes());
           },
           py::arg("peer"), py::arg("offset"), py::arg("array"))
      .def("get",
           [](PyDomain& p, py::handle array, int peer, int64_t offset) {
             const auto d = p.live("get");
             const uint64_t off = nonneg(offset, "get: offset");
             Buffer b(array, true, "Domain.get: array");
             py::gil_scoped_release nogil;
             d->get(b.data(), peer, off, b.bytes());
           },
           py::arg("array"), py::arg("peer"), py::arg("offset"))
      .def("put_notify",
           [](PyDomain& p, int peer, int64_t offset, py::handle array, int64_t signal, int64_t value, py::handle op) {
             const auto d = p.live("put_notify");
             const uint64_t off = nonneg(offset, "put_notify: offset");
             const uint64_t sig = nonneg(signal, "put_notify: signal");
             const rwin::NotifyOp o = op_arg(op);
             Buffer b(array, false, "Domain.put_notify: array");
             py::gil_scoped_release nogil;
             d->put_notify(peer, off, b.data(), b.bytes(), sig, value, o);
           },
           py::arg("peer"), py::arg("offset"), py::arg("array"), py::arg("signal"), py::arg("value") = 1,
           py::arg("op") = rwin::NotifyOp::AtomicAdd, "the data, then the peer's signal word (a waiter that sees it sees the data)")
      .def("notify",
           [](PyDomain& p, int peer, int64_t signal, int64_t value, py::handle op) {
             const auto d = p.live("notify");
             const uint64_t sig = nonneg(signal, "notify: signal");
             const rwin::NotifyOp o = op_arg(op);
             py::gil_scoped_release nogil;
             d->notify(peer, sig, value, o);
           },
           py::arg("peer"), py::arg("signal"), py::arg("value") = 1, py::arg("op") = rwin::NotifyOp::AtomicAdd)
      .def("flush",
           [](PyDomain& p) {
             const auto d = p.live("flush");
             py::gil_scoped_release nogil;
             d->flush();
           })
      .def("wait",
           [](PyDomain& p, int64_t signal, int64_t expected, py::handle cmp, py::object timeout) {
             const auto d = p.live("wait");
             const uint64_t sig = nonneg(signal, "wait: signal");
             const rwin::WaitCmp c = cmp_arg(cmp);
             std::optional<std::chrono::milliseconds> t;
             if (!timeout.is_none()) t = seconds_arg(timeout, "Domain.wait: timeout");
             py::gil_scoped_release nogil;
             d->wait(sig, expected, c, t);
           },
           py::arg("signal"), py::arg("expected"), py::arg("cmp") = rwin::WaitCmp::GE, py::arg("timeout") = py::none(),
           "until this rank's signal word satisfies cmp expected; PeerFailed once a rank of the domain failed")
      .def("test",
           [](PyDomain& p, int64_t signal, int64_t expected, py::handle cmp) {
             const auto d = p.live("test");
             const uint64_t sig = nonneg(signal, "test: signal");
             const rwin::WaitCmp c = cmp_arg(cmp);
             py::gil_scoped_release nogil;
             return d->test(sig, expected, c);
           },
           py::arg("signal"), py::arg("expected"), py::arg("cmp") = rwin::WaitCmp::GE)
      .def("signal", [](PyDomain& p, int64_t signal) { return p.live("signal")->signal(nonneg(signal, "signal: index")); },
           py::arg("index"), "an atomic load of this rank's signal word")
      .def("fail_peer",
           [](PyDomain& p, int peer, const std::string& reason) {
             const auto d = p.live("fail_peer");
             d->fail_peer(peer, reason);  // never waits for the domain's calls: no GIL release needed
           },
           py::arg("peer"), py::arg("reason") = "",
           "the caller's health lane says `peer` failed: every call involving it (and every unsatisfied wait) raises "
           "PeerFailedError naming it and the reason. Any thread.")
      .def_property_readonly("failed_peers", [](const PyDomain& p) { return p.live("failed_peers")->failed_peers(); })
      .def("__repr__", [](const PyDomain& p) {
        return "<rwin.Domain " + p.name + ", " + state_text(p.d->state()) + ">";
      });
}

}  // namespace rwin_py

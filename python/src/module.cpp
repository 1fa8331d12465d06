// rwin._rwin: the Python binding of rwin (issue 11), shaped like the runtime's `pld` module.
//
//   with rwin.Context() as ctx:
//       buf = ctx.alloc_window_buffer(nbytes)
//       x = ctx.window(buf, [1, SIZE], dtype=rwin.float32, offset=0)
//       ctx.put(dst, peer=p, src=x[0:1, 0:SIZE]); ctx.notify(sig, peer=p, offsets=[0, 0], value=1)
//
// Design notes (the user-facing ones are in python/rwin/__init__.py and README.md):
// - Every blocking call releases the GIL, then takes the context's mutex (a Context is one-thread-at-a-time
//   in C++; the mutex serialises Python threads that share one).
// - Fork: a pthread_atfork child handler bumps a generation counter (no getpid() syscall per call); a
//   Context used in another generation than the one it was made in raises rwin.ForkedContextError naming
//   both pids, and closing or collecting it there only detaches (the C++ destructor never runs in a child:
//   it would run a barrier and tear down connections the parent still uses).
//
// Files: errors.cpp (rwin.Error and its subclasses), dtypes.cpp (rwin.DType), views.cpp (windows, slices,
// numpy and DLPack), p2p.cpp (put/get/notify/wait), collectives.cpp, agent.cpp (rwin.Agent); this one
// defines the module and rwin.Context with its options.
#include <pthread.h>

#include <cmath>

#include "binding.h"

using namespace rwin_py;

// ---------------------------------------------------------------------------------------------

PYBIND11_MODULE(_rwin, m) {
  m.doc() = "rwin: one-sided RDMA windows (put/get/notify/wait), shaped like the runtime's pld module";
  pthread_atfork(nullptr, nullptr, after_fork_child);
  m.attr("__version__") = rwin::version();  // the librwin this module runs against

  bind_errors(m);
  bind_dtypes(m);
  bind_views(m);

  py::class_<RwContext> context(m, "Context");
  context.def(py::init([](py::object rank, py::object nranks, py::object root, py::object transport, py::object timeout,
                       py::object startup_timeout, py::object ib_device, py::object store) {
             rwin::Options o;
             if (!rank.is_none()) o.rank = rank.cast<int>();
             if (!nranks.is_none()) o.nranks = nranks.cast<int>();
             if (!root.is_none()) o.root = root.cast<std::string>();
             if (!transport.is_none()) o.transport = transport.cast<std::string>();
             if (!ib_device.is_none()) o.ib_device = ib_device.cast<std::string>();
             auto ms = [](py::handle t, const char* what) {
               const double s = t.cast<double>();
               if (!(s > 0)) fail(ErrorCode::InvalidArgument, std::string(what) + " must be a positive number of seconds");
               return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(s * 1000.0)));
             };
             if (!timeout.is_none()) o.op_timeout = ms(timeout, "timeout");
             if (!startup_timeout.is_none()) o.startup_timeout = ms(startup_timeout, "startup_timeout");
             if (const int n = g_live_at_fork.load(std::memory_order_relaxed); n > 0) {
               // UCX keeps process-wide state (its async thread, which accepts connections) that a
               // forked child does not get: a second Context there would hang in wire-up. Say so.
               fail(ErrorCode::Unsupported,
                    "rwin.Context(): this process (" + std::to_string(getpid()) + ") was forked from one with " +
                        std::to_string(n) + " open rwin.Context; a Context can be created after fork only if none was "
                        "open when the process forked (fork the workers first, or close the Context before os.fork(), "
                        "or use multiprocessing's 'spawn' start method)");
             }
             auto pc = std::make_unique<RwContext>();
             pc->gen = g_fork_gen.load(std::memory_order_relaxed);
             pc->pid = getpid();
             if (!store.is_none()) {
               if (rank.is_none() || nranks.is_none()) {
                 fail(ErrorCode::InvalidArgument, "rwin.Context(store=...): give rank= and nranks= with the store");
               }
               auto s = make_py_store(store);
               o.rank = -1;  // given to the constructor, not as options
               o.nranks = -1;
               const int r = rank.cast<int>(), n = nranks.cast<int>();
               py::gil_scoped_release nogil;  // the store's calls take it back one at a time
               pc->ctx = std::make_unique<rwin::Context>(std::move(s), r, n, o);
             } else {
               py::gil_scoped_release nogil;
               pc->ctx = std::make_unique<rwin::Context>(o);
             }
             g_live.fetch_add(1, std::memory_order_relaxed);
             pc->rank = pc->ctx->rank();
             pc->nranks = pc->ctx->size();
             pc->transport = pc->ctx->transport_name();
             return pc;
           }),
           py::kw_only(), py::arg("rank") = py::none(), py::arg("nranks") = py::none(), py::arg("root") = py::none(),
           py::arg("transport") = py::none(), py::arg("timeout") = py::none(), py::arg("startup_timeout") = py::none(),
           py::arg("ib_device") = py::none(), py::arg("store") = py::none(),
           "Context(*, rank=None, nranks=None, root=None, transport=None, timeout=None, startup_timeout=None, "
           "ib_device=None, store=None): start this rank of the job (collective). store: an object with "
           "torch.distributed.Store's set/get/add/check/wait (a torch store as it is) used as the rendezvous, "
           "with rank and nranks given: no rwin store server, no listening port, no RWIN_ROOT (docs/EMBEDDING.md).")
      .def("fail_peer",
           [](RwContext& pc, int peer, const std::string& reason) {
             // Not through run(): no context mutex, so a health-lane thread can call it while another
             // thread is blocked in a wait (rwin::Context::fail_peer is thread-safe).
             pc.check_fork("fail_peer");
             std::lock_guard<std::mutex> fl(pc.fail_mu);
             pc.live("fail_peer").fail_peer(peer, reason);
           },
           py::arg("peer"), py::arg("reason"),
           "fail_peer(peer, reason): tell rwin that rank peer is gone (your own heartbeat saw it die). From any "
           "thread, also while another is blocked in wait(); every later call involving peer raises "
           "rwin.PeerFailedError naming it and reason, a wait in progress raises it once.")
      .def_readonly("rank", &RwContext::rank)
      .def_readonly("nranks", &RwContext::nranks)
      .def_readonly("transport", &RwContext::transport)
      .def_readonly("pid", &RwContext::pid)
      .def_property_readonly("closed", [](const RwContext& c) { return !c.ctx; })
      .def("close", &RwContext::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](RwContext& c, py::args) { c.close(); })
      .def("__repr__", [](const RwContext& c) {
        return "<rwin.Context rank " + std::to_string(c.rank) + " of " + std::to_string(c.nranks) + " (" + c.transport +
               (c.ctx ? ")>" : ", closed)>");
      })
      .def("alloc_window_buffer",
           [](py::object self, size_t nbytes, py::object name) {
             RwContext& pc = self.cast<RwContext&>();
             std::string n = name.is_none() ? "buffer#" + std::to_string(pc.next_buffer) : name.cast<std::string>();
             pc.check_fork("alloc_window_buffer");
             ++pc.next_buffer;  // also counted when named, so the sequence stays aligned across ranks
             auto b = std::make_unique<RwBuffer>();
             b->b = pc.run("alloc_window_buffer", [&](rwin::Context& c) { return c.alloc_window_buffer(n, nbytes); });
             b->ctx = self;
             return b;
           },
           py::arg("nbytes"), py::arg("name") = py::none())
      .def("free",
           [](RwContext& pc, RwBuffer& b) { pc.run("free", [&](rwin::Context& c) { c.free(b.b); }); }, py::arg("buffer"))
      .def("window",
           [](py::object self, RwBuffer& buf, py::object shape, py::object dtype, uint64_t offset) {
             RwContext& pc = self.cast<RwContext&>();
             pc.check_fork("window");
             auto sv = shape.cast<std::vector<int64_t>>();
             if (sv.size() != 2) fail(ErrorCode::InvalidArgument, "window: shape must be [rows, columns], got " + std::to_string(sv.size()) + " dimensions");
             const DType t = to_dtype(dtype);
             auto w = std::make_unique<RwWindow>();
             w->w = pc.live("window").window(buf.b, t, {sv[0], sv[1]}, offset);
             w->s = w->w.all();
             w->keep = self;
             w->dtype = t;
             w->wshape = {sv[0], sv[1]};
             w->esz = rwin::dtype_size(t);
             return w;
           },
           py::arg("buffer"), py::arg("shape"), py::arg("dtype") = DType::F32, py::arg("offset") = 0)
      .def("fence",
           [](RwContext& pc, int peer) {
             pc.run("fence", [&](rwin::Context& c) { c.fence(peer); });
             pc.drop_pending(peer);
           },
           py::arg("peer"))
      .def("quiet",
           [](RwContext& pc) {
             pc.run("quiet", [&](rwin::Context& c) { c.quiet(); });
             pc.drop_pending(-1);
           })
      .def("barrier", [](RwContext& pc) {
        pc.run("barrier", [&](rwin::Context& c) { c.barrier(); });
        pc.drop_pending(-1);
      })
      .def("stats",
           [](RwContext& pc) {
             const rwin::Stats s = pc.run("stats", [&](rwin::Context& c) { return c.stats(); });
             auto peer = [](const rwin::PeerStats& p) {
               py::dict d;
               d["puts"] = p.puts;
               d["put_bytes"] = p.put_bytes;
               d["put_adds"] = p.put_adds;
               d["put_add_bytes"] = p.put_add_bytes;
               d["gets"] = p.gets;
               d["get_bytes"] = p.get_bytes;
               d["chunks"] = p.chunks;
               d["notifies"] = p.notifies;
               d["fetching_atomics"] = p.fetching_atomics;
               d["fences"] = p.fences;
               return d;
             };
             py::dict d;
             d["total"] = peer(s.total);
             py::list peers;
             for (const auto& p : s.peers) peers.append(peer(p));
             d["peers"] = peers;
             const std::pair<const char*, uint64_t> own[] = {
                 {"waits", s.waits}, {"waits_blocked", s.waits_blocked}, {"wait_ns", s.wait_ns}, {"tests", s.tests},
                 {"tests_satisfied", s.tests_satisfied}, {"quiets", s.quiets}, {"barriers", s.barriers},
                 {"failed_peers", s.failed_peers}, {"reg_cache_hits", s.reg_cache_hits},
                 {"reg_cache_misses", s.reg_cache_misses}, {"wrs", s.wrs}, {"doorbells", s.doorbells},
                 {"signaled", s.signaled}, {"inline_wrs", s.inline_wrs}, {"cqes", s.cqes}, {"drained", s.drained},
                 {"striped", s.striped}, {"fence_reads", s.fence_reads}};
             for (const auto& [k, v] : own) d[k] = v;
             return d;
           },
           "stats() -> dict: what this context did (docs/OBSERVING.md): 'total' and 'peers' (a dict per rank: puts, "
           "put_bytes, put_adds, put_add_bytes, gets, get_bytes, chunks, notifies, fetching_atomics, fences) and the "
           "context's own counters (waits, waits_blocked, wait_ns, tests, tests_satisfied, quiets, barriers, "
           "failed_peers, reg_cache_hits/misses, and the transport's wrs, doorbells, signaled, inline_wrs, cqes, "
           "drained, striped, fence_reads)");

  bind_p2p(m, context);
  bind_collectives(m, context);
  bind_agent(m);
  bind_domain(m);

  m.def("_fork_generation", [] { return g_fork_gen.load(); });
}

// rwin._rwin collectives: ReduceOp, rwin.Team and the collective methods of Context and Team, with
// the runtime's names and shapes (`ctx.allreduce(x, op=rwin.ReduceOp.Sum, mode="ring")`,
// `ctx.allgather(stage, data)`, ...). Operands are window views (ctx.window(...) or alloc results);
// every call releases the GIL and takes the context's mutex like the point-to-point calls.
#include "rwin/collectives.h"

#include "binding.h"

namespace rwin_py {

namespace {

using rwin::AllreduceMode;
using rwin::ReduceOp;

// A team handle; keeps its Context object alive.
struct RwTeam {
  rwin::Team t;
  py::object ctx;
  RwContext& pc() const { return ctx.cast<RwContext&>(); }
};

// The whole window a collective operand names. A slice covering all of its window is that window;
// any other slice is refused (collectives work on whole views: make one with ctx.window()).
const rwin::Window& whole_window(py::handle h, const char* what) {
  View& v = need_view(h, what);
  if (!v.is_window()) {
    fail(ErrorCode::InvalidArgument,
         std::string(what) + ": a slice " + shape_text(v.s.shape) + " at (" + std::to_string(v.s.offsets[0]) + ", " +
             std::to_string(v.s.offsets[1]) + ") of a window " + shape_text(v.wshape) +
             "; collectives take whole window views: make one with ctx.window(buffer, shape, dtype, offset)");
  }
  return v.w;
}

AllreduceMode to_mode(py::handle h) {
  if (h.is_none()) return AllreduceMode::Auto;
  if (py::isinstance<AllreduceMode>(h)) return h.cast<AllreduceMode>();
  if (py::isinstance<py::str>(h)) return rwin::parse_allreduce_mode(h.cast<std::string>());
  fail(ErrorCode::InvalidArgument, "allreduce: mode must be \"auto\", \"mesh\", \"ring\" or \"bruck\" (or rwin.AllreduceMode), got " +
                                       py::repr(h).cast<std::string>());
}

ReduceOp to_op(py::handle h) {
  if (py::isinstance<ReduceOp>(h)) return h.cast<ReduceOp>();
  if (py::isinstance<py::str>(h)) return rwin::parse_reduce_op(h.cast<std::string>());
  fail(ErrorCode::InvalidArgument, "op must be an rwin.ReduceOp (Sum, Max, Min, Prod) or its name, got " +
                                       py::repr(h).cast<std::string>());
}

// Runs f(team) on `pc`'s thread discipline (GIL released, mutex held).
template <class F>
void on_team(RwContext& pc, const char* what, rwin::Team& team, F&& f) {
  pc.run(what, [&](rwin::Context&) { f(team); });
}

// A started collective (Team::start_*, rwin.CollectiveRequest): keeps its Context object and its
// operands' Python objects alive until it is dropped.
struct RwRequest {
  rwin::CollectiveRequest r;
  py::object ctx;
  py::tuple operands;
};

// The blocking form runs `block(team)`; the start_ form runs `start(team)` and returns its request.
template <bool Start, class Block, class Begin>
py::object call(RwContext& pc, py::object ctx_obj, const char* what, rwin::Team& team, py::tuple operands, Block&& block,
                Begin&& begin) {
  if constexpr (Start) {
    auto req = std::make_unique<RwRequest>();
    req->r = pc.run(what, [&](rwin::Context&) { return begin(team); });
    req->ctx = std::move(ctx_obj);
    req->operands = std::move(operands);
    return py::cast(std::move(req));
  } else {
    on_team(pc, what, team, block);
    return py::none();
  }
}

// The collective methods, shared by Context (over world(ctx)) and Team, blocking or (Start) their
// start_ forms. `team_of(self)` gives the RwContext, a handle of the rwin::Team to run on, and the
// Python object that keeps the context alive.
template <bool Start, class Cls, class TeamOf>
void def_collectives(Cls& cls, TeamOf team_of) {
  const std::string pre = Start ? "start_" : "";
  const char* nb = Start ? "\nstart_ form: returns an rwin.CollectiveRequest at once (test(), wait()); until it finished the\n"
                           "context belongs to the collective and its windows must not be touched."
                         : "";
  cls.def(
         (pre + "allreduce").c_str(),
         [team_of](py::object self, py::object x, py::object op, py::object mode, py::object out) {
           auto [pc, team, holder] = team_of(self);
           const rwin::Window& src = whole_window(x, "allreduce: x");
           const ReduceOp o = to_op(op);
           const AllreduceMode md = to_mode(mode);
           const rwin::Window& dst = out.is_none() ? src : whole_window(out, "allreduce: out");
           return call<Start>(*pc, holder, "allreduce", team, py::make_tuple(x, out),
                              [&](rwin::Team& t) { t.allreduce(src, dst, o, md); },
                              [&](rwin::Team& t) { return t.start_allreduce(src, dst, o, md); });
         },
         py::arg("x"), py::kw_only(), py::arg("op") = ReduceOp::Sum, py::arg("mode") = "auto", py::arg("out") = py::none(),
         (pre + "allreduce(x, op=ReduceOp.Sum, mode=\"auto\"|\"mesh\"|\"ring\", out=None): x (or out) becomes op over every\n"
                "member's x, bitwise identical everywhere. In place unless out is given." + nb).c_str())
      .def(
          (pre + "broadcast").c_str(),
          [team_of](py::object self, py::object x, int root) {
            auto [pc, team, holder] = team_of(self);
            const rwin::Window& w = whole_window(x, "broadcast: x");
            return call<Start>(*pc, holder, "broadcast", team, py::make_tuple(x),
                               [&](rwin::Team& t) { t.broadcast(w, root); },
                               [&](rwin::Team& t) { return t.start_broadcast(w, root); });
          },
          py::arg("x"), py::kw_only(), py::arg("root") = 0,
          (pre + "broadcast(x, root=0): every member's x becomes the root's." + nb).c_str())
      .def(
          (pre + "allgather").c_str(),
          [team_of](py::object self, py::object stage, py::object data) {
            auto [pc, team, holder] = team_of(self);
            const rwin::Window& s = whole_window(stage, "allgather: stage");
            const rwin::Window& d = whole_window(data, "allgather: data");
            return call<Start>(*pc, holder, "allgather", team, py::make_tuple(stage, data),
                               [&](rwin::Team& t) { t.allgather(s, d); },
                               [&](rwin::Team& t) { return t.start_allgather(s, d); });
          },
          py::arg("stage"), py::arg("data"),
          (pre + "allgather(stage [1, S], data [NR, S]): data[r] becomes member r's stage." + nb).c_str())
      .def(
          (pre + "reduce_scatter").c_str(),
          [team_of](py::object self, py::object data, py::object op, py::object out) {
            auto [pc, team, holder] = team_of(self);
            const rwin::Window& d = whole_window(data, "reduce_scatter: data");
            const ReduceOp o = to_op(op);
            if (out.is_none()) {
              return call<Start>(*pc, holder, "reduce_scatter", team, py::make_tuple(data),
                                 [&](rwin::Team& t) { t.reduce_scatter(d, o); },
                                 [&](rwin::Team& t) { return t.start_reduce_scatter(d, o); });
            }
            const rwin::Window& w = whole_window(out, "reduce_scatter: out");
            return call<Start>(*pc, holder, "reduce_scatter", team, py::make_tuple(data, out),
                               [&](rwin::Team& t) { t.reduce_scatter(d, w, o); },
                               [&](rwin::Team& t) { return t.start_reduce_scatter(d, w, o); });
          },
          py::arg("data"), py::kw_only(), py::arg("op") = ReduceOp::Sum, py::arg("out") = py::none(),
          (pre + "reduce_scatter(data [NR, S], op=ReduceOp.Sum, out=None): data[my_rank] (or out) becomes op over every\n"
                 "member's data[my_rank]." + nb).c_str())
      .def(
          (pre + "all_to_all").c_str(),
          [team_of](py::object self, py::object stage, py::object data) {
            auto [pc, team, holder] = team_of(self);
            const rwin::Window& s = whole_window(stage, "all_to_all: stage");
            const rwin::Window& d = whole_window(data, "all_to_all: data");
            return call<Start>(*pc, holder, "all_to_all", team, py::make_tuple(stage, data),
                               [&](rwin::Team& t) { t.all_to_all(s, d); },
                               [&](rwin::Team& t) { return t.start_all_to_all(s, d); });
          },
          py::arg("stage"), py::arg("data"),
          (pre + "all_to_all(stage [NR, S], data [NR, S]): data[src] becomes member src's stage[my_rank]." + nb).c_str())
      .def(
          (pre + "all_to_all_v").c_str(),
          [team_of](py::object self, py::object send, std::vector<int64_t> send_counts, py::object recv,
                    std::vector<int64_t> recv_counts, std::optional<std::vector<int64_t>> send_offsets,
                    std::optional<std::vector<int64_t>> recv_offsets) {
            auto [pc, team, holder] = team_of(self);
            const rwin::Window& s = whole_window(send, "all_to_all_v: send");
            const rwin::Window& d = whole_window(recv, "all_to_all_v: recv");
            if (send_offsets.has_value() != recv_offsets.has_value()) {
              fail(ErrorCode::InvalidArgument,
                   "all_to_all_v: give both send_offsets and recv_offsets, or neither (packed blocks)");
            }
            if (!send_offsets) {  // packed blocks
              return call<Start>(*pc, holder, "all_to_all_v", team, py::make_tuple(send, recv),
                                 [&](rwin::Team& t) { t.all_to_all_v(s, send_counts, d, recv_counts); },
                                 [&](rwin::Team& t) { return t.start_all_to_all_v(s, send_counts, d, recv_counts); });
            }
            return call<Start>(*pc, holder, "all_to_all_v", team, py::make_tuple(send, recv),
                               [&](rwin::Team& t) { t.all_to_all_v(s, send_counts, *send_offsets, d, recv_counts, *recv_offsets); },
                               [&](rwin::Team& t) {
                                 return t.start_all_to_all_v(s, send_counts, *send_offsets, d, recv_counts, *recv_offsets);
                               });
          },
          py::arg("send"), py::arg("send_counts"), py::arg("recv"), py::arg("recv_counts"), py::kw_only(),
          py::arg("send_offsets") = py::none(), py::arg("recv_offsets") = py::none(),
          (pre + "all_to_all_v(send, send_counts, recv, recv_counts, send_offsets=None, recv_offsets=None): member q\n"
                 "gets send_counts[q] elements of send (from send_offsets[q]) at recv_offsets[my_rank] of its recv;\n"
                 "recv_counts[p] must equal member p's send_counts[my_rank]. Counts and offsets in elements of the\n"
                 "views (row-major), one per member; without offsets the blocks are packed." + nb).c_str());
  if constexpr (Start) {
    cls.def(
        "start_barrier",
        [team_of](py::object self) {
          auto [pc, team, holder] = team_of(self);
          return call<true>(*pc, holder, "barrier", team, py::tuple(), [](rwin::Team&) {},
                            [](rwin::Team& t) { return t.start_barrier(); });
        },
        "start_barrier(): the collectives' dissemination barrier, started (an rwin.CollectiveRequest).");
  }
}

std::unique_ptr<RwBuffer> team_buffer(RwTeam& t, size_t nbytes, py::object name) {
  RwContext& pc = t.pc();
  std::string n = name.is_none() ? "buffer#" + std::to_string(pc.next_buffer) : name.cast<std::string>();
  pc.check_fork("alloc_window_buffer");
  ++pc.next_buffer;  // every member of the team counts it; ranks outside never use this name
  auto b = std::make_unique<RwBuffer>();
  b->b = pc.run("alloc_window_buffer", [&](rwin::Context&) { return t.t.alloc_window_buffer(n, nbytes); });
  b->ctx = t.ctx;
  return b;
}

}  // namespace

void bind_collectives(py::module_& m, py::class_<RwContext>& context) {
  py::enum_<ReduceOp>(m, "ReduceOp", "Reduction of a collective: Sum, Max, Min, Prod (f16/bf16 accumulate in f32).")
      .value("Sum", ReduceOp::Sum)
      .value("Max", ReduceOp::Max)
      .value("Min", ReduceOp::Min)
      .value("Prod", ReduceOp::Prod);
  py::enum_<AllreduceMode>(m, "AllreduceMode", "allreduce algorithm (or pass \"auto\", \"mesh\", \"ring\", \"bruck\").")
      .value("Auto", AllreduceMode::Auto)
      .value("Mesh", AllreduceMode::Mesh)
      .value("Ring", AllreduceMode::Ring)
      .value("Bruck", AllreduceMode::Bruck);

  py::class_<RwRequest>(m, "CollectiveRequest",
                        "A collective started with a start_* method: it runs on the context's worker thread while\n"
                        "the caller computes. test() (never blocks) and wait() (bounded by the collective's deadline)\n"
                        "raise its error if it failed; until one of them reported it finished, every other call on\n"
                        "the context raises. Dropping it before it finished waits for it.")
      .def("test", [](RwRequest& q) {
             py::gil_scoped_release nogil;
             return q.r.test();
           }, "True once the collective finished (raises its error if it failed); never blocks.")
      .def("wait", [](RwRequest& q) {
             py::gil_scoped_release nogil;
             q.r.wait();
           }, "Blocks until the collective finished (raises its error if it failed).")
      .def_property_readonly("what", [](const RwRequest& q) { return q.r.what(); }, "\"allreduce on world\"")
      .def("__repr__", [](const RwRequest& q) { return "<rwin.CollectiveRequest " + q.r.what() + ">"; });

  py::class_<RwTeam> team(m, "Team", "A subset of the job's ranks with its own windows (the runtime's comm domain).");
  team.def_property_readonly("rank", [](const RwTeam& t) { return t.t.rank(); }, "this rank's index in the team")
      .def_property_readonly("size", [](const RwTeam& t) { return t.t.size(); })
      .def_property_readonly("nranks", [](const RwTeam& t) { return t.t.size(); })
      .def_property_readonly("ranks", [](const RwTeam& t) { return t.t.ranks(); }, "members' job ranks, team order")
      .def("global_rank", [](const RwTeam& t, int r) { return t.t.global_rank(r); }, py::arg("team_rank"))
      .def("alloc_window_buffer", &team_buffer, py::arg("nbytes"), py::arg("name") = py::none(),
           "collective over the team's members: a buffer only they hold (views: ctx.window(buf, ...))")
      .def("barrier",
           [](RwTeam& t) { on_team(t.pc(), "team barrier", t.t, [](rwin::Team& tm) { tm.barrier(); }); })
      .def("__repr__", [](const RwTeam& t) {
        std::string s = "<rwin.Team rank " + std::to_string(t.t.rank()) + " of [";
        for (size_t i = 0; i < t.t.ranks().size(); ++i) s += (i ? ", " : "") + std::to_string(t.t.ranks()[i]);
        return s + "]>";
      });
  auto team_of_team = [](py::object self) {
    RwTeam& t = self.cast<RwTeam&>();
    return std::tuple<RwContext*, rwin::Team, py::object>(&t.pc(), t.t, t.ctx);
  };
  def_collectives<false>(team, team_of_team);
  def_collectives<true>(team, team_of_team);

  context
      .def(
          "team",
          [](py::object self, std::vector<int> ranks) {
            RwContext& pc = self.cast<RwContext&>();
            auto t = std::make_unique<RwTeam>();
            t->t = pc.run("team", [&](rwin::Context& c) { return rwin::make_team(c, ranks); });
            t->ctx = self;
            return t;
          },
          py::arg("ranks"),
          "team(ranks): collective over the listed job ranks (each passes the same list, others do not call)")
      .def(
          "world",
          [](py::object self) {
            RwContext& pc = self.cast<RwContext&>();
            auto t = std::make_unique<RwTeam>();
            t->t = pc.run("world", [&](rwin::Context& c) { return rwin::world(c); });
            t->ctx = self;
            return t;
          },
          "the whole job as a Team (the one the Context's own collective methods use)");
  // Context's collectives run on world(ctx), fetched per call (cheap: cached in the context).
  auto team_of_ctx = [](py::object self) {
    RwContext& pc = self.cast<RwContext&>();
    pc.check_fork("collective");
    return std::tuple<RwContext*, rwin::Team, py::object>(&pc, rwin::world(pc.live("collective")), self);
  };
  def_collectives<false>(context, team_of_ctx);
  def_collectives<true>(context, team_of_ctx);
}

}  // namespace rwin_py

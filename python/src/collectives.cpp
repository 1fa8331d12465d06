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

// The collective methods, shared by Context (over world(ctx)) and Team. `team_of(self)` gives the
// RwContext and a handle of the rwin::Team to run on.
template <class Cls, class TeamOf>
void def_collectives(Cls& cls, TeamOf team_of) {
  cls.def(
         "allreduce",
         [team_of](py::object self, py::object x, py::object op, py::object mode, py::object out) {
           auto [pc, team] = team_of(self);
           const rwin::Window& src = whole_window(x, "allreduce: x");
           const ReduceOp o = to_op(op);
           const AllreduceMode md = to_mode(mode);
           if (out.is_none()) {
             on_team(*pc, "allreduce", team, [&](rwin::Team& t) { t.allreduce(src, o, md); });
           } else {
             const rwin::Window& dst = whole_window(out, "allreduce: out");
             on_team(*pc, "allreduce", team, [&](rwin::Team& t) { t.allreduce(src, dst, o, md); });
           }
         },
         py::arg("x"), py::kw_only(), py::arg("op") = ReduceOp::Sum, py::arg("mode") = "auto", py::arg("out") = py::none(),
         "allreduce(x, op=ReduceOp.Sum, mode=\"auto\"|\"mesh\"|\"ring\", out=None): x (or out) becomes op over every\n"
         "member's x, bitwise identical everywhere. In place unless out is given.")
      .def(
          "broadcast",
          [team_of](py::object self, py::object x, int root) {
            auto [pc, team] = team_of(self);
            const rwin::Window& w = whole_window(x, "broadcast: x");
            on_team(*pc, "broadcast", team, [&](rwin::Team& t) { t.broadcast(w, root); });
          },
          py::arg("x"), py::kw_only(), py::arg("root") = 0, "broadcast(x, root=0): every member's x becomes the root's.")
      .def(
          "allgather",
          [team_of](py::object self, py::object stage, py::object data) {
            auto [pc, team] = team_of(self);
            const rwin::Window& s = whole_window(stage, "allgather: stage");
            const rwin::Window& d = whole_window(data, "allgather: data");
            on_team(*pc, "allgather", team, [&](rwin::Team& t) { t.allgather(s, d); });
          },
          py::arg("stage"), py::arg("data"), "allgather(stage [1, S], data [NR, S]): data[r] becomes member r's stage.")
      .def(
          "reduce_scatter",
          [team_of](py::object self, py::object data, py::object op, py::object out) {
            auto [pc, team] = team_of(self);
            const rwin::Window& d = whole_window(data, "reduce_scatter: data");
            const ReduceOp o = to_op(op);
            if (out.is_none()) {
              on_team(*pc, "reduce_scatter", team, [&](rwin::Team& t) { t.reduce_scatter(d, o); });
            } else {
              const rwin::Window& w = whole_window(out, "reduce_scatter: out");
              on_team(*pc, "reduce_scatter", team, [&](rwin::Team& t) { t.reduce_scatter(d, w, o); });
            }
          },
          py::arg("data"), py::kw_only(), py::arg("op") = ReduceOp::Sum, py::arg("out") = py::none(),
          "reduce_scatter(data [NR, S], op=ReduceOp.Sum, out=None): data[my_rank] (or out) becomes op over every\n"
          "member's data[my_rank].")
      .def(
          "all_to_all",
          [team_of](py::object self, py::object stage, py::object data) {
            auto [pc, team] = team_of(self);
            const rwin::Window& s = whole_window(stage, "all_to_all: stage");
            const rwin::Window& d = whole_window(data, "all_to_all: data");
            on_team(*pc, "all_to_all", team, [&](rwin::Team& t) { t.all_to_all(s, d); });
          },
          py::arg("stage"), py::arg("data"),
          "all_to_all(stage [NR, S], data [NR, S]): data[src] becomes member src's stage[my_rank].")
      .def(
          "all_to_all_v",
          [team_of](py::object self, py::object send, std::vector<int64_t> send_counts, py::object recv,
                    std::vector<int64_t> recv_counts, std::optional<std::vector<int64_t>> send_offsets,
                    std::optional<std::vector<int64_t>> recv_offsets) {
            auto [pc, team] = team_of(self);
            const rwin::Window& s = whole_window(send, "all_to_all_v: send");
            const rwin::Window& d = whole_window(recv, "all_to_all_v: recv");
            if (send_offsets.has_value() != recv_offsets.has_value()) {
              fail(ErrorCode::InvalidArgument,
                   "all_to_all_v: give both send_offsets and recv_offsets, or neither (packed blocks)");
            }
            on_team(*pc, "all_to_all_v", team, [&](rwin::Team& t) {
              if (send_offsets) {
                t.all_to_all_v(s, send_counts, *send_offsets, d, recv_counts, *recv_offsets);
              } else {
                t.all_to_all_v(s, send_counts, d, recv_counts);
              }
            });
          },
          py::arg("send"), py::arg("send_counts"), py::arg("recv"), py::arg("recv_counts"), py::kw_only(),
          py::arg("send_offsets") = py::none(), py::arg("recv_offsets") = py::none(),
          "all_to_all_v(send, send_counts, recv, recv_counts, send_offsets=None, recv_offsets=None): member q\n"
          "gets send_counts[q] elements of send (from send_offsets[q]) at recv_offsets[my_rank] of its recv;\n"
          "recv_counts[p] must equal member p's send_counts[my_rank]. Counts and offsets in elements of the\n"
          "views (row-major), one per member; without offsets the blocks are packed.");
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
  def_collectives(team, [](py::object self) {
    RwTeam& t = self.cast<RwTeam&>();
    return std::pair<RwContext*, rwin::Team>(&t.pc(), t.t);
  });

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
  def_collectives(context, [](py::object self) {
    RwContext& pc = self.cast<RwContext&>();
    pc.check_fork("collective");
    return std::pair<RwContext*, rwin::Team>(&pc, rwin::world(pc.live("collective")));
  });
}

}  // namespace rwin_py

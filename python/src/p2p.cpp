// rwin._rwin point-to-point calls: Context.put/put_nbi/get/get_nbi/notify/wait/test, the fetching atomics,
// their enums (rwin.AtomicType, rwin.NotifyOp, rwin.WaitCmp) and the C++ loops bench/python_overhead.py
// compares with.
// Operands are window views (views.cpp) or numpy arrays; every call releases the GIL and takes the
// context's mutex (RwContext::run).
#include <cmath>

#include "binding.h"

namespace rwin_py {

std::optional<std::chrono::milliseconds> to_timeout(py::handle t) {
  if (t.is_none()) return std::nullopt;
  const double s = t.cast<double>();
  if (std::isnan(s)) fail(ErrorCode::InvalidArgument, "timeout: NaN seconds");
  if (s < 0) return std::chrono::milliseconds(-1);  // the C++ call names it
  if (s > 1e9) return std::chrono::milliseconds(static_cast<int64_t>(1e12));
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(s * 1000.0)));
}

namespace {

Shape2 to_offsets(py::handle o) {
  if (o.is_none()) return {0, 0};
  auto v = o.cast<std::vector<int64_t>>();
  if (v.size() != 2) fail(ErrorCode::InvalidArgument, "offsets: two indices [row, column] expected, got " + std::to_string(v.size()));
  return {v[0], v[1]};
}

void do_put(RwContext& pc, py::handle dsth, int peer, py::handle srch, rwin::AtomicType at, bool nbi) {
  const char* what = nbi ? "put_nbi" : "put";
  View& dst = need_view(dsth, nbi ? "put_nbi: dst" : "put: dst");
  if (View* src = as_view(srch)) {
    pc.run(what, [&](rwin::Context& c) {
      if (nbi) c.put_nbi(dst.s, peer, src->s);
      else c.put(dst.s, peer, src->s, at);
    });
    return;
  }
  pc.check_fork(what);
  const rwin::Local l = to_local(srch, dst, false, nbi ? "put_nbi: src" : "put: src");
  py::object keep = py::reinterpret_borrow<py::object>(srch);  // alive for the call
  pc.run(what, [&](rwin::Context& c) {
    if (nbi) c.put_nbi(dst.s, peer, l);
    else c.put(dst.s, peer, l, at);
  });
  if (nbi) pc.pending.emplace_back(peer, std::move(keep));
}

void do_get(RwContext& pc, py::handle dsth, int peer, py::handle srch, bool nbi) {
  const char* what = nbi ? "get_nbi" : "get";
  View& src = need_view(srch, nbi ? "get_nbi: src" : "get: src");
  if (View* dst = as_view(dsth)) {
    pc.run(what, [&](rwin::Context& c) {
      if (nbi) c.get_nbi(dst->s, peer, src.s);
      else c.get(dst->s, peer, src.s);
    });
    return;
  }
  pc.check_fork(what);
  const rwin::Local l = to_local(dsth, src, true, nbi ? "get_nbi: dst" : "get: dst");
  py::object keep = py::reinterpret_borrow<py::object>(dsth);
  pc.run(what, [&](rwin::Context& c) {
    if (nbi) c.get_nbi(l, peer, src.s);
    else c.get(l, peer, src.s);
  });
  if (nbi) pc.pending.emplace_back(peer, std::move(keep));
}

// The int64 the old value of a fetching atomic's _nbi form goes to: element `index` (flat, C
// order) of a writeable, C-contiguous, aligned numpy int64 array the caller keeps until quiet.
int64_t* fetch_slot(py::handle fetch, int64_t index, const char* what) {
  if (!py::isinstance<py::array>(fetch)) {
    fail(ErrorCode::InvalidArgument, std::string(what) + ": fetch: expected a numpy int64 array, got " +
                                         py::str(py::type::handle_of(fetch).attr("__name__")).cast<std::string>());
  }
  auto a = py::reinterpret_borrow<py::array>(fetch);
  if (a.dtype().kind() != 'i' || a.itemsize() != 8) {
    fail(ErrorCode::DtypeMismatch, std::string(what) + ": fetch: numpy array of dtype " +
                                       py::str(a.dtype()).cast<std::string>() + ", int64 expected (the old value is widened to it)");
  }
  if (!a.writeable() || !(a.flags() & py::array::c_style) || reinterpret_cast<uintptr_t>(a.data()) % 8 != 0) {
    fail(ErrorCode::InvalidArgument, std::string(what) + ": fetch: the int64 array must be writeable, C-contiguous and aligned");
  }
  if (index < 0 || index >= a.size()) {
    fail(ErrorCode::OutOfBounds, std::string(what) + ": fetch_index " + std::to_string(index) + " outside the fetch array of " +
                                     std::to_string(a.size()) + " elements");
  }
  return static_cast<int64_t*>(a.mutable_data()) + index;
}

// ---------------------------------------------------------------------------------------------
// The per-call hot path (put/get/notify/wait/test): METH_FASTCALL methods with keyword names matched
// by interned-pointer identity and enum members by identity, instead of pybind11's dispatcher (which
// costs ~0.45 us for the seed's keyword style; see bench/RESULTS.md).

PyObject* g_enum[3][6] = {};  // the members' own objects: AtomicType, NotifyOp, WaitCmp (fast identity test)

template <class E>
E enum_arg(PyObject* o, int which, int count, E dflt) {
  if (!o) return dflt;
  for (int i = 0; i < count; ++i) {
    if (o == g_enum[which][i]) return static_cast<E>(i);
  }
  try {
    return py::handle(o).cast<E>();  // another object of the type
  } catch (const py::cast_error&) {
    static const char* types[] = {"rwin.AtomicType", "rwin.NotifyOp", "rwin.WaitCmp"};
    PyErr_Format(PyExc_TypeError, "expected a member of %s, got %R", types[which], o);
    throw py::error_already_set();
  }
}

int64_t int_arg(PyObject* o, const char* what) {
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    fail(ErrorCode::InvalidArgument, std::string(what) + ": an integer expected, got " +
                                         py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>());
  }
  return v;
}

int peer_arg(PyObject* o) {
  const int64_t v = int_arg(o, "peer");
  if (v < INT32_MIN || v > INT32_MAX) fail(ErrorCode::PeerOutOfRange, "peer " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

struct FastSig {
  const char* fname;
  std::vector<const char*> names;
  std::vector<PyObject*> interned;
  size_t required;
};

// Fills out[i] (borrowed, or null when not given) from positional and keyword arguments.
void parse_fast(const FastSig& sig, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** out) {
  const size_t n = sig.names.size();
  for (size_t i = 0; i < n; ++i) out[i] = nullptr;
  if (static_cast<size_t>(nargs) > n) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %zu arguments (%zd given)", sig.fname, n, nargs);
    throw py::error_already_set();
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  const Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nk; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    size_t j = 0;
    while (j < n && sig.interned[j] != key) ++j;
    if (j == n) {
      for (j = 0; j < n && PyUnicode_Compare(sig.interned[j], key) != 0; ++j) {
      }
    }
    if (j == n) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", sig.fname, key);
      throw py::error_already_set();
    }
    if (out[j]) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", sig.fname, sig.names[j]);
      throw py::error_already_set();
    }
    out[j] = args[nargs + k];
  }
  for (size_t i = 0; i < sig.required; ++i) {
    if (!out[i]) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", sig.fname, sig.names[i]);
      throw py::error_already_set();
    }
  }
}

FastSig make_sig(const char* fname, std::vector<const char*> names, size_t required) {
  FastSig s{fname, std::move(names), {}, required};
  for (const char* n : s.names) s.interned.push_back(PyUnicode_InternFromString(n));  // leaked: module lifetime
  return s;
}

// Runs body() translating C++ and pybind11 exceptions into Python ones; null on error.
template <class F>
PyObject* guarded(F&& body) {
  try {
    return body();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const rwin::Error& e) {
    set_python_error(e);
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyObject* do_notify(RwContext& pc, PyObject* sig, int peer, PyObject* offsets, int64_t value, rwin::NotifyOp op) {
  View& v = need_view(sig, "notify: signal");
  if (v.is_window() || offsets) {
    if (!v.is_window()) fail(ErrorCode::InvalidArgument, "notify: offsets given with a slice (pass the window, or the one-element slice alone)");
    const Shape2 off = to_offsets(offsets ? py::handle(offsets) : py::handle(Py_None));
    pc.run("notify", [&](rwin::Context& c) { c.notify(v.w, peer, off, value, op); });
  } else {
    pc.run("notify", [&](rwin::Context& c) { c.notify(v.s, peer, value, op); });
  }
  Py_RETURN_NONE;
}

PyObject* do_wait_or_test(RwContext& pc, bool wait, PyObject* sig, PyObject* offsets, int64_t expected, rwin::WaitCmp cmp,
                          PyObject* timeout) {
  const char* what = wait ? "wait" : "test";
  View& v = need_view(sig, wait ? "wait: signal" : "test: signal");
  const auto t = wait ? to_timeout(timeout ? py::handle(timeout) : py::handle(Py_None)) : std::nullopt;
  bool r = true;
  if (v.is_window() || offsets) {
    if (!v.is_window()) fail(ErrorCode::InvalidArgument, std::string(what) + ": offsets given with a slice (pass the window, or the slice alone)");
    const Shape2 off = to_offsets(offsets ? py::handle(offsets) : py::handle(Py_None));
    r = pc.run(what, [&](rwin::Context& c) {
      if (!wait) return c.test(v.w, off, expected, cmp);
      c.wait(v.w, off, expected, cmp, t);
      return true;
    });
  } else {
    r = pc.run(what, [&](rwin::Context& c) {
      if (!wait) return c.test(v.s, expected, cmp);
      c.wait(v.s, expected, cmp, t);
      return true;
    });
  }
  if (wait) Py_RETURN_NONE;
  return PyBool_FromLong(r);
}

RwContext& self_ctx(PyObject* self) { return py::handle(self).cast<RwContext&>(); }

#define RWIN_FAST(fn) \
  PyObject* fn(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames)

FastSig* g_sig_put; FastSig* g_sig_get; FastSig* g_sig_notify; FastSig* g_sig_wait; FastSig* g_sig_test;
FastSig* g_sig_put_nbi; FastSig* g_sig_get_nbi;

RWIN_FAST(fast_put) {
  return guarded([&]() -> PyObject* {
    PyObject* a[4];
    parse_fast(*g_sig_put, args, nargs, kwnames, a);
    do_put(self_ctx(self), a[0], peer_arg(a[1]), a[2], enum_arg(a[3], 0, 2, rwin::AtomicType::None), false);
    Py_RETURN_NONE;
  });
}
RWIN_FAST(fast_put_nbi) {
  return guarded([&]() -> PyObject* {
    PyObject* a[3];
    parse_fast(*g_sig_put_nbi, args, nargs, kwnames, a);
    do_put(self_ctx(self), a[0], peer_arg(a[1]), a[2], rwin::AtomicType::None, true);
    Py_RETURN_NONE;
  });
}
RWIN_FAST(fast_get) {
  return guarded([&]() -> PyObject* {
    PyObject* a[3];
    parse_fast(*g_sig_get, args, nargs, kwnames, a);
    do_get(self_ctx(self), a[0], peer_arg(a[1]), a[2], false);
    Py_RETURN_NONE;
  });
}
RWIN_FAST(fast_get_nbi) {
  return guarded([&]() -> PyObject* {
    PyObject* a[3];
    parse_fast(*g_sig_get_nbi, args, nargs, kwnames, a);
    do_get(self_ctx(self), a[0], peer_arg(a[1]), a[2], true);
    Py_RETURN_NONE;
  });
}
RWIN_FAST(fast_notify) {
  return guarded([&]() -> PyObject* {
    PyObject* a[5];
    parse_fast(*g_sig_notify, args, nargs, kwnames, a);
    return do_notify(self_ctx(self), a[0], peer_arg(a[1]), a[2], a[3] ? int_arg(a[3], "value") : 1,
                     enum_arg(a[4], 1, 2, rwin::NotifyOp::AtomicAdd));
  });
}
RWIN_FAST(fast_wait) {
  return guarded([&]() -> PyObject* {
    PyObject* a[5];
    parse_fast(*g_sig_wait, args, nargs, kwnames, a);
    return do_wait_or_test(self_ctx(self), true, a[0], a[1], a[2] ? int_arg(a[2], "expected") : 1,
                           enum_arg(a[3], 2, 6, rwin::WaitCmp::GE), a[4]);
  });
}
RWIN_FAST(fast_test) {
  return guarded([&]() -> PyObject* {
    PyObject* a[4];
    parse_fast(*g_sig_test, args, nargs, kwnames, a);
    return do_wait_or_test(self_ctx(self), false, a[0], a[1], a[2] ? int_arg(a[2], "expected") : 1,
                           enum_arg(a[3], 2, 6, rwin::WaitCmp::GE), nullptr);
  });
}

PyMethodDef g_fast_methods[] = {
    {"put", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_put)), METH_FASTCALL | METH_KEYWORDS,
     "put(dst, peer, src, atomic=AtomicType.None_): copy local src (a Window, Slice or numpy array) into peer's dst.\n"
     "Returns when src may be reused; visible at the peer after a later notify to it, quiet() or barrier()."},
    {"put_nbi", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_put_nbi)), METH_FASTCALL | METH_KEYWORDS,
     "put_nbi(dst, peer, src): non-blocking put; src must not change until quiet() or fence(peer)."},
    {"get", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_get)), METH_FASTCALL | METH_KEYWORDS,
     "get(dst, peer, src): copy peer's src into local dst (a Window, Slice or numpy array)."},
    {"get_nbi", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_get_nbi)), METH_FASTCALL | METH_KEYWORDS,
     "get_nbi(dst, peer, src): non-blocking get; dst holds the data after quiet() or fence(peer)."},
    {"notify", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_notify)), METH_FASTCALL | METH_KEYWORDS,
     "notify(signal, peer, offsets=[0, 0], value=1, op=NotifyOp.AtomicAdd): update element `offsets` of peer's int32/int64\n"
     "signal window (or a one-element slice, without offsets); ordered after every earlier put to that peer."},
    {"wait", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_wait)), METH_FASTCALL | METH_KEYWORDS,
     "wait(signal, offsets=[0, 0], expected=1, cmp=WaitCmp.Ge, timeout=None): block (GIL released) until the local\n"
     "element (or every element of a slice) satisfies cmp; timeout in seconds, None = the Context's default."},
    {"test", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_test)), METH_FASTCALL | METH_KEYWORDS,
     "test(signal, offsets=[0, 0], expected=1, cmp=WaitCmp.Ge) -> bool: wait's question without blocking."},
};

}  // namespace

void bind_p2p(py::module_& m, py::class_<RwContext>& context) {
  py::enum_<rwin::AtomicType>(m, "AtomicType")
      .value("None_", rwin::AtomicType::None)
      .value("Add", rwin::AtomicType::Add);
  py::enum_<rwin::NotifyOp>(m, "NotifyOp").value("AtomicAdd", rwin::NotifyOp::AtomicAdd).value("Set", rwin::NotifyOp::Set);
  py::enum_<rwin::WaitCmp>(m, "WaitCmp")
      .value("Eq", rwin::WaitCmp::EQ)
      .value("Ne", rwin::WaitCmp::NE)
      .value("Gt", rwin::WaitCmp::GT)
      .value("Ge", rwin::WaitCmp::GE)
      .value("Lt", rwin::WaitCmp::LT)
      .value("Le", rwin::WaitCmp::LE);
  {
    py::object cls = context;
    g_sig_put = new FastSig(make_sig("put", {"dst", "peer", "src", "atomic"}, 3));
    g_sig_put_nbi = new FastSig(make_sig("put_nbi", {"dst", "peer", "src"}, 3));
    g_sig_get = new FastSig(make_sig("get", {"dst", "peer", "src"}, 3));
    g_sig_get_nbi = new FastSig(make_sig("get_nbi", {"dst", "peer", "src"}, 3));
    g_sig_notify = new FastSig(make_sig("notify", {"signal", "peer", "offsets", "value", "op"}, 2));
    g_sig_wait = new FastSig(make_sig("wait", {"signal", "offsets", "expected", "cmp", "timeout"}, 1));
    g_sig_test = new FastSig(make_sig("test", {"signal", "offsets", "expected", "cmp"}, 1));
    const char* at[] = {"None_", "Add"};
    const char* no[] = {"AtomicAdd", "Set"};
    const char* wc[] = {"Eq", "Ne", "Gt", "Ge", "Lt", "Le"};
    for (int i = 0; i < 2; ++i) g_enum[0][i] = m.attr("AtomicType").attr(at[i]).cast<py::object>().release().ptr();
    for (int i = 0; i < 2; ++i) g_enum[1][i] = m.attr("NotifyOp").attr(no[i]).cast<py::object>().release().ptr();
    for (int i = 0; i < 6; ++i) g_enum[2][i] = m.attr("WaitCmp").attr(wc[i]).cast<py::object>().release().ptr();
    for (auto& def : g_fast_methods) {
      PyObject* d = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &def);
      if (!d || PyObject_SetAttrString(cls.ptr(), def.ml_name, d) < 0) throw py::error_already_set();
      Py_DECREF(d);
    }
  }

  // Fetching atomics (issue 25): target = a window (element `offsets`, default [0, 0]) or a
  // one-element slice, as notify takes it. Each returns the element's old value (an int).
  auto element = [](py::handle target, py::handle offsets, const char* what) {
    View& v = need_view(target, what);
    if (!offsets.is_none() && !v.is_window()) {
      fail(ErrorCode::InvalidArgument, std::string(what) + ": offsets given with a slice (pass the window, or the one-element slice alone)");
    }
    return v.is_window() ? v.w.slice(to_offsets(offsets), {1, 1}) : v.s;
  };
  context
      .def("fetch_add",
           [element](RwContext& pc, py::handle target, int peer, int64_t value, py::handle offsets) {
             const rwin::Slice e = element(target, offsets, "fetch_add: target");
             return pc.run("fetch_add", [&](rwin::Context& c) { return c.fetch_add(e, peer, value); });
           },
           py::arg("target"), py::arg("peer"), py::arg("value"), py::arg("offsets") = py::none(),
           "fetch_add(target, peer, value, offsets=None) -> int: add to peer's int32/int64/uint32/uint64 element "
           "atomically (wrapping like its type) and return its old value; ordered after earlier puts to peer.")
      .def("compare_swap",
           [element](RwContext& pc, py::handle target, int peer, int64_t expected, int64_t desired, py::handle offsets) {
             const rwin::Slice e = element(target, offsets, "compare_swap: target");
             return pc.run("compare_swap", [&](rwin::Context& c) { return c.compare_swap(e, peer, expected, desired); });
           },
           py::arg("target"), py::arg("peer"), py::arg("expected"), py::arg("desired"), py::arg("offsets") = py::none(),
           "compare_swap(target, peer, expected, desired, offsets=None) -> int: store desired if the element holds "
           "expected; return the old value either way.")
      .def("swap",
           [element](RwContext& pc, py::handle target, int peer, int64_t value, py::handle offsets) {
             const rwin::Slice e = element(target, offsets, "swap: target");
             return pc.run("swap", [&](rwin::Context& c) { return c.swap(e, peer, value); });
           },
           py::arg("target"), py::arg("peer"), py::arg("value"), py::arg("offsets") = py::none(),
           "swap(target, peer, value, offsets=None) -> int: store value, return the old one.")
      .def("atomic_fetch",
           [element](RwContext& pc, py::handle target, int peer, py::handle offsets) {
             const rwin::Slice e = element(target, offsets, "atomic_fetch: target");
             return pc.run("atomic_fetch", [&](rwin::Context& c) { return c.atomic_fetch(e, peer); });
           },
           py::arg("target"), py::arg("peer"), py::arg("offsets") = py::none(),
           "atomic_fetch(target, peer, offsets=None) -> int: the element's value, read atomically.");

  // Non-blocking forms: the old value goes to fetch[fetch_index] (a numpy int64 array, kept alive
  // here until quiet/barrier/fence(peer), as put_nbi's operands).
  auto nbi = [element](RwContext& pc, const char* what, py::handle fetch, int64_t index, py::handle target,
                       py::handle offsets, int peer, auto&& call) {
    const std::string t = std::string(what) + ": target";
    const rwin::Slice e = element(target, offsets, t.c_str());
    int64_t* out = fetch_slot(fetch, index, what);
    py::object keep = py::reinterpret_borrow<py::object>(fetch);
    pc.run(what, [&](rwin::Context& c) { call(c, out, e); });
    pc.pending.emplace_back(peer, std::move(keep));
  };
  const char* valid = " Non-blocking: the old value (as the blocking form returns it) is in fetch[fetch_index] "
                      "(a writeable C-contiguous numpy int64 array; flat index) once quiet(), barrier() or "
                      "fence(peer) returned; unspecified before, and never written if that call raised.";
  context
      .def("fetch_add_nbi",
           [nbi](RwContext& pc, py::handle fetch, py::handle target, int peer, int64_t value, py::handle offsets,
                 int64_t fetch_index) {
             nbi(pc, "fetch_add_nbi", fetch, fetch_index, target, offsets, peer,
                 [&](rwin::Context& c, int64_t* out, const rwin::Slice& e) { c.fetch_add_nbi(out, e, peer, value); });
           },
           py::arg("fetch"), py::arg("target"), py::arg("peer"), py::arg("value"), py::arg("offsets") = py::none(),
           py::arg("fetch_index") = 0,
           (std::string("fetch_add_nbi(fetch, target, peer, value, offsets=None, fetch_index=0): fetch_add without "
                        "waiting.") + valid).c_str())
      .def("compare_swap_nbi",
           [nbi](RwContext& pc, py::handle fetch, py::handle target, int peer, int64_t expected, int64_t desired,
                 py::handle offsets, int64_t fetch_index) {
             nbi(pc, "compare_swap_nbi", fetch, fetch_index, target, offsets, peer,
                 [&](rwin::Context& c, int64_t* out, const rwin::Slice& e) {
                   c.compare_swap_nbi(out, e, peer, expected, desired);
                 });
           },
           py::arg("fetch"), py::arg("target"), py::arg("peer"), py::arg("expected"), py::arg("desired"),
           py::arg("offsets") = py::none(), py::arg("fetch_index") = 0,
           (std::string("compare_swap_nbi(fetch, target, peer, expected, desired, offsets=None, fetch_index=0): "
                        "compare_swap without waiting.") + valid).c_str())
      .def("swap_nbi",
           [nbi](RwContext& pc, py::handle fetch, py::handle target, int peer, int64_t value, py::handle offsets,
                 int64_t fetch_index) {
             nbi(pc, "swap_nbi", fetch, fetch_index, target, offsets, peer,
                 [&](rwin::Context& c, int64_t* out, const rwin::Slice& e) { c.swap_nbi(out, e, peer, value); });
           },
           py::arg("fetch"), py::arg("target"), py::arg("peer"), py::arg("value"), py::arg("offsets") = py::none(),
           py::arg("fetch_index") = 0,
           (std::string("swap_nbi(fetch, target, peer, value, offsets=None, fetch_index=0): swap without waiting.") +
            valid).c_str())
      .def("atomic_fetch_nbi",
           [nbi](RwContext& pc, py::handle fetch, py::handle target, int peer, py::handle offsets, int64_t fetch_index) {
             nbi(pc, "atomic_fetch_nbi", fetch, fetch_index, target, offsets, peer,
                 [&](rwin::Context& c, int64_t* out, const rwin::Slice& e) { c.atomic_fetch_nbi(out, e, peer); });
           },
           py::arg("fetch"), py::arg("target"), py::arg("peer"), py::arg("offsets") = py::none(),
           py::arg("fetch_index") = 0,
           (std::string("atomic_fetch_nbi(fetch, target, peer, offsets=None, fetch_index=0): atomic_fetch without "
                        "waiting.") + valid).c_str());

  // bench/python_overhead.py: the same loops as the Python side, run in C++ on the same Context and
  // windows, so "Python vs C++" is measured in one process with one set of buffers. Seconds elapsed.
  m.def("_bench_pingpong",
        [](RwContext& pc, py::handle dsth, py::handle srch, py::handle sigh, int peer, bool active, int64_t iters,
           int64_t seen) {
          View& dst = need_view(dsth, "dst");
          View& src = need_view(srch, "src");
          View& sig = need_view(sigh, "sig");
          return pc.run("_bench_pingpong", [&](rwin::Context& c) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int64_t i = 0; i < iters; ++i) {
              if (active) {
                c.put(dst.s, peer, src.s);
                c.notify(sig.w, peer, {0, 0}, 1);
                c.wait(sig.w, {0, 0}, ++seen);
              } else {
                c.wait(sig.w, {0, 0}, ++seen);
                c.put(dst.s, peer, src.s);
                c.notify(sig.w, peer, {0, 0}, 1);
              }
            }
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          });
        });
  m.def("_bench_put_bw", [](RwContext& pc, py::handle dsth, py::handle srch, int peer, int64_t groups, int outstanding) {
    View& dst = need_view(dsth, "dst");
    View& src = need_view(srch, "src");
    return pc.run("_bench_put_bw", [&](rwin::Context& c) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t g = 0; g < groups; ++g) {
        for (int i = 0; i < outstanding; ++i) c.put(dst.s, peer, src.s);
        c.quiet();
      }
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  });
}

}  // namespace rwin_py

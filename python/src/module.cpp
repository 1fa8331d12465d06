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
// - numpy views and DLPack capsules of a window point at the window's memory and keep the Python window
//   object alive, but ctx.close() (or freeing the buffer) unmaps that memory: views must not outlive it.
#include <pthread.h>

#include <cmath>

#include "binding.h"

namespace rwin_py {

// ---------------------------------------------------------------------------------------------
// Errors: rwin.Error and one subclass per ErrorCode, carrying .code (the code's name) and .message.

constexpr int kCodes = 14;
PyObject* g_error = nullptr;
PyObject* g_code_error[kCodes] = {};
PyObject* g_forked_error = nullptr;

struct CodeClass {
  ErrorCode code;
  const char* name;
  PyObject* builtin;  // an extra builtin base, so `except IndexError` etc. also catch it (or null)
};

void set_error(PyObject* cls, const char* code, const char* message) {
  PyObject* inst = PyObject_CallFunction(cls, "s", message);
  if (!inst) return;  // the call set an error itself
  PyObject* c = PyUnicode_FromString(code);
  PyObject* m = PyUnicode_FromString(message);
  if (c) PyObject_SetAttrString(inst, "code", c);
  if (m) PyObject_SetAttrString(inst, "message", m);
  Py_XDECREF(c);
  Py_XDECREF(m);
  PyErr_SetObject(cls, inst);
  Py_DECREF(inst);
}


// ---------------------------------------------------------------------------------------------
// Element types

const char* py_dtype_name(DType t) {
  switch (t) {
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I8: return "int8";
    case DType::I16: return "int16";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
    case DType::U16: return "uint16";
    case DType::U32: return "uint32";
    case DType::U64: return "uint64";
  }
  return "?";
}

// numpy dtype of a window's .numpy() view, per DType (bfloat16: uint16, the same bytes). Leaked on
// purpose: they must outlive interpreter finalisation order.
PyObject* g_np_dtype[12] = {};
py::dtype np_dtype(DType t) { return py::reinterpret_borrow<py::dtype>(g_np_dtype[static_cast<int>(t)]); }

bool dtype_from_numpy(const py::dtype& d, DType* out, bool* is_ml_bf16) {
  *is_ml_bf16 = false;
  const char kind = d.kind();
  const auto size = d.itemsize();
  auto pick = [&](DType t) {
    *out = t;
    return true;
  };
  if (kind == 'f') {
    if (size == 2) return pick(DType::F16);
    if (size == 4) return pick(DType::F32);
    if (size == 8) return pick(DType::F64);
  } else if (kind == 'i') {
    if (size == 1) return pick(DType::I8);
    if (size == 2) return pick(DType::I16);
    if (size == 4) return pick(DType::I32);
    if (size == 8) return pick(DType::I64);
  } else if (kind == 'u') {
    if (size == 1) return pick(DType::U8);
    if (size == 2) return pick(DType::U16);
    if (size == 4) return pick(DType::U32);
    if (size == 8) return pick(DType::U64);
  } else if (kind == 'V' && size == 2 && py::str(d.attr("name")).cast<std::string>() == "bfloat16") {
    *is_ml_bf16 = true;  // ml_dtypes.bfloat16 (what jax/torch interop uses)
    return pick(DType::BF16);
  }
  return false;
}

DType to_dtype(py::handle h) {
  if (py::isinstance<DType>(h)) return h.cast<DType>();
  if (py::isinstance<py::str>(h)) {
    const auto s = h.cast<std::string>();
    for (DType t : rwin::all_dtypes) {
      if (s == py_dtype_name(t)) return t;
    }
    if (s != "bfloat16" && s != "float16") {
      try {
        return rwin::parse_dtype(s);  // "f32", "bf16", ...
      } catch (const rwin::Error&) {
      }
    }
  }
  py::dtype d;
  try {
    d = py::dtype::from_args(py::reinterpret_borrow<py::object>(h));
  } catch (py::error_already_set&) {
    fail(ErrorCode::InvalidArgument, "dtype: " + py::repr(h).cast<std::string>() +
                                         " is not an rwin dtype (rwin.float16 bfloat16 float32 float64 int8 int16 "
                                         "int32 int64 uint8 uint16 uint32 uint64) nor a numpy dtype");
  }
  DType t;
  bool ml;
  if (!dtype_from_numpy(d, &t, &ml)) {
    fail(ErrorCode::DtypeMismatch, "dtype: numpy dtype " + py::str(d).cast<std::string>() + " has no rwin element type");
  }
  return t;
}

std::pair<int64_t, int64_t> parse_index(py::handle k, int64_t extent, int dim) {
  const char* dn = dim == 0 ? "row" : "column";
  if (PySlice_Check(k.ptr())) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(k.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
    if (step != 1) fail(ErrorCode::InvalidArgument, std::string("window slice: ") + dn + " step " +
                                                         std::to_string(step) + " is not supported (steps of 1 only)");
    if (stop == PY_SSIZE_T_MAX) stop = extent;
    if (start < 0 || stop < 0) {
      fail(ErrorCode::OutOfBounds, std::string("window slice: negative ") + dn + " index " +
                                       std::to_string(start < 0 ? start : stop) + " (not supported: indices count from 0)");
    }
    if (stop > extent || start > stop) {
      fail(ErrorCode::OutOfBounds, std::string("window slice: ") + dn + " range " + std::to_string(start) + ":" +
                                       std::to_string(stop) + " is outside 0:" + std::to_string(extent));
    }
    return {start, stop - start};
  }
  if (PyIndex_Check(k.ptr())) {
    const auto i = py::reinterpret_borrow<py::int_>(PyNumber_Index(k.ptr())).cast<int64_t>();
    if (i < 0 || i >= extent) {
      fail(ErrorCode::OutOfBounds, std::string("window slice: ") + dn + " index " + std::to_string(i) +
                                       " is outside 0:" + std::to_string(extent) +
                                       (i < 0 ? " (negative indices are not supported)" : ""));
    }
    return {i, 1};
  }
  fail(ErrorCode::InvalidArgument, "window slice: an index must be an int or a slice, got " +
                                       py::repr(k).cast<std::string>());
}

py::object make_slice(py::object self, py::handle key) {
  View& v = self.cast<View&>();
  py::tuple t = py::isinstance<py::tuple>(key) ? py::reinterpret_borrow<py::tuple>(key) : py::make_tuple(key);
  if (t.size() > 2) fail(ErrorCode::InvalidArgument, "window slice: windows are 2-D, got " + std::to_string(t.size()) + " indices");
  Shape2 off = v.s.offsets, shape = v.s.shape;
  for (size_t d = 0; d < t.size(); ++d) {
    auto [o, n] = parse_index(t[d], v.s.shape[d], static_cast<int>(d));
    off[d] = v.s.offsets[d] + o;
    shape[d] = n;
  }
  auto s = std::make_unique<RwSlice>();
  s->w = v.w;
  s->s = v.w.slice(off, shape);
  s->keep = self;  // keeps the window (and through it the context) alive
  s->dtype = v.dtype;
  s->wshape = v.wshape;
  s->esz = v.esz;
  return py::cast(std::move(s));
}

py::array numpy_view(py::object self) {
  View& v = self.cast<View&>();
  char* p = v.data();  // throws UseAfterFree once the buffer (or the context) is gone
  const auto esz = static_cast<py::ssize_t>(v.esz);
  return py::array(np_dtype(v.dtype), std::vector<py::ssize_t>{v.s.shape[0], v.s.shape[1]},
                   std::vector<py::ssize_t>{v.wshape[1] * esz, esz}, p, self);
}

std::string shape_text(Shape2 s) { return "[" + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "]"; }

// A numpy array as plain local memory (rwin::Local) of the same dtype and shape as `side`, no copy.
rwin::Local to_local(py::handle obj, const View& side, bool writable, const char* what) {
  if (!py::isinstance<py::array>(obj)) {
    fail(ErrorCode::InvalidArgument, std::string(what) + ": expected an rwin Window, a Slice of one or a numpy array, got " +
                                         py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
  }
  auto a = py::reinterpret_borrow<py::array>(obj);
  DType have = DType::F32;
  bool ml = false;
  const DType want = side.dtype;
  const bool known = dtype_from_numpy(a.dtype(), &have, &ml);
  if (!known || !(have == want || (want == DType::BF16 && have == DType::U16))) {
    fail(ErrorCode::DtypeMismatch, std::string(what) + ": numpy array of dtype " + py::str(a.dtype()).cast<std::string>() +
                                       ", the window slice holds " + py_dtype_name(want) +
                                       (want == DType::BF16 ? " (pass a uint16 array of the bits, or ml_dtypes.bfloat16)" : ""));
  }
  const int64_t esz = a.itemsize();
  Shape2 shape{0, 0};
  int64_t st0 = 0, st1 = esz;
  if (a.ndim() == 2) {
    shape = {a.shape(0), a.shape(1)};
    st0 = a.strides(0);
    st1 = a.strides(1);
  } else if (a.ndim() == 1 && side.s.shape[0] == 1) {
    shape = {1, a.shape(0)};
    st1 = a.strides(0);
  } else if (a.ndim() == 1) {
    shape = {a.shape(0), 1};
    st0 = a.strides(0);
  } else {
    fail(ErrorCode::ShapeMismatch, std::string(what) + ": numpy array of " + std::to_string(a.ndim()) +
                                       " dimensions (1-D or 2-D expected)");
  }
  if (shape != side.s.shape) {
    fail(ErrorCode::ShapeMismatch, std::string(what) + ": numpy array of shape " + shape_text(shape) +
                                       ", the window slice is " + shape_text(side.s.shape));
  }
  int64_t row_stride = 0;
  if (shape[0] * shape[1] > 0) {
    if (shape[1] > 1 && st1 != esz) {
      fail(ErrorCode::InvalidArgument, std::string(what) + ": the numpy array's rows are not contiguous (element stride " +
                                           std::to_string(st1) + " bytes): pass numpy.ascontiguousarray(a)");
    }
    if (shape[0] > 1) {
      if (st0 <= 0 || st0 % esz != 0 || st0 < shape[1] * esz) {
        fail(ErrorCode::InvalidArgument, std::string(what) + ": numpy row stride of " + std::to_string(st0) +
                                             " bytes is not a positive multiple of the element size >= a row: pass "
                                             "numpy.ascontiguousarray(a)");
      }
      row_stride = st0 / esz;
    }
  }
  if (writable && !a.writeable()) fail(ErrorCode::InvalidArgument, std::string(what) + ": the numpy array is read-only");
  return rwin::Local{const_cast<void*>(a.data()), want, shape, row_stride};
}

// ---------------------------------------------------------------------------------------------
// DLPack (v0.8 ABI, unversioned capsule "dltensor"), written here: no dlpack headers needed.

struct DLDevice {
  int32_t device_type;  // kDLCPU = 1
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLExport {
  DLManagedTensor t{};
  int64_t shape[2] = {0, 0};
  int64_t strides[2] = {0, 0};
  PyObject* owner = nullptr;  // the window / slice, kept alive while the tensor lives
};

void dl_deleter(DLManagedTensor* t) {
  auto* e = static_cast<DLExport*>(t->manager_ctx);
  if (Py_IsInitialized()) {
    PyGILState_STATE st = PyGILState_Ensure();
    Py_XDECREF(e->owner);
    PyGILState_Release(st);
  }
  delete e;
}

void dl_capsule_destructor(PyObject* cap) {
  // Consumed capsules are renamed "used_dltensor" by the consumer, which then owns the tensor.
  if (!PyCapsule_IsValid(cap, "dltensor")) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  if (t && t->deleter) t->deleter(t);
  PyErr_Restore(type, value, tb);
}

DLDataType dl_dtype(DType t) {
  const auto bits = static_cast<uint8_t>(rwin::dtype_size(t) * 8);
  switch (t) {
    case DType::F16: case DType::F32: case DType::F64: return {2, bits, 1};
    case DType::BF16: return {4, bits, 1};
    case DType::I8: case DType::I16: case DType::I32: case DType::I64: return {0, bits, 1};
    case DType::U8: case DType::U16: case DType::U32: case DType::U64: return {1, bits, 1};
  }
  return {1, bits, 1};
}

py::object dlpack(py::object self, py::object stream, py::object max_version, py::object dl_device, py::object copy) {
  (void)stream;
  (void)max_version;  // we produce the unversioned (legacy) capsule, which every consumer accepts
  if (!copy.is_none() && copy.cast<bool>()) {
    PyErr_SetString(PyExc_BufferError, "rwin: __dlpack__(copy=True): windows are exported without a copy only");
    throw py::error_already_set();
  }
  if (!dl_device.is_none()) {
    auto dev = dl_device.cast<std::pair<int, int>>();
    if (dev.first != 1) {
      PyErr_SetString(PyExc_BufferError, "rwin: windows live in host memory (kDLCPU)");
      throw py::error_already_set();
    }
  }
  View& v = self.cast<View&>();
  auto e = std::make_unique<DLExport>();
  e->shape[0] = v.s.shape[0];
  e->shape[1] = v.s.shape[1];
  e->strides[0] = v.wshape[1];
  e->strides[1] = 1;
  e->t.dl_tensor.data = v.data();
  e->t.dl_tensor.device = {1, 0};
  e->t.dl_tensor.ndim = 2;
  e->t.dl_tensor.dtype = dl_dtype(v.dtype);
  e->t.dl_tensor.shape = e->shape;
  e->t.dl_tensor.strides = e->strides;
  e->t.dl_tensor.byte_offset = 0;
  e->t.manager_ctx = e.get();
  e->t.deleter = dl_deleter;
  e->owner = self.ptr();
  Py_INCREF(e->owner);
  PyObject* cap = PyCapsule_New(&e->t, "dltensor", dl_capsule_destructor);
  if (!cap) {
    Py_DECREF(e->owner);
    throw py::error_already_set();
  }
  (void)e.release();
  return py::reinterpret_steal<py::object>(cap);
}

// ---------------------------------------------------------------------------------------------
// Operations

View& need_view(py::handle h, const char* what) {
  View* v = as_view(h);
  if (!v) {
    fail(ErrorCode::InvalidArgument, std::string(what) + ": expected an rwin Window or a Slice of one, got " +
                                         py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>());
  }
  return *v;
}

std::optional<std::chrono::milliseconds> to_timeout(py::handle t) {
  if (t.is_none()) return std::nullopt;
  const double s = t.cast<double>();
  if (std::isnan(s)) fail(ErrorCode::InvalidArgument, "timeout: NaN seconds");
  if (s < 0) return std::chrono::milliseconds(-1);  // the C++ call names it
  if (s > 1e9) return std::chrono::milliseconds(static_cast<int64_t>(1e12));
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(s * 1000.0)));
}

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
  } catch (const ForkedError& e) {
    set_error(g_forked_error, "InvalidArgument", e.what());
  } catch (const rwin::Error& e) {
    const int i = static_cast<int>(e.code());
    set_error(i >= 0 && i < kCodes ? g_code_error[i] : g_error, rwin::to_string(e.code()), e.what());
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

}  // namespace rwin_py

using namespace rwin_py;

// ---------------------------------------------------------------------------------------------

PYBIND11_MODULE(_rwin, m) {
  m.doc() = "rwin: one-sided RDMA windows (put/get/notify/wait), shaped like the runtime's pld module";
  pthread_atfork(nullptr, nullptr, after_fork_child);
  m.attr("__version__") = rwin::version();  // the librwin this module runs against

  // Errors
  g_error = PyErr_NewException("rwin.Error", PyExc_RuntimeError, nullptr);
  m.attr("Error") = py::handle(g_error);
  const CodeClass classes[kCodes] = {
      {ErrorCode::InvalidArgument, "InvalidArgumentError", PyExc_ValueError},
      {ErrorCode::PeerOutOfRange, "PeerOutOfRangeError", PyExc_ValueError},
      {ErrorCode::OutOfBounds, "OutOfBoundsError", PyExc_IndexError},
      {ErrorCode::ShapeMismatch, "ShapeMismatchError", PyExc_ValueError},
      {ErrorCode::DtypeMismatch, "DtypeMismatchError", PyExc_TypeError},
      {ErrorCode::Misaligned, "MisalignedError", PyExc_ValueError},
      {ErrorCode::WindowMismatch, "WindowMismatchError", nullptr},
      {ErrorCode::UseAfterFree, "UseAfterFreeError", nullptr},
      {ErrorCode::Timeout, "TimeoutError", PyExc_TimeoutError},
      {ErrorCode::PeerFailed, "PeerFailedError", nullptr},
      {ErrorCode::Transport, "TransportError", nullptr},
      {ErrorCode::Bootstrap, "BootstrapError", nullptr},
      {ErrorCode::Unsupported, "UnsupportedError", nullptr},
      {ErrorCode::CollectiveMismatch, "CollectiveMismatchError", nullptr},
  };
  for (const auto& c : classes) {
    const std::string qual = std::string("rwin.") + c.name;
    PyObject* bases = c.builtin ? PyTuple_Pack(2, g_error, c.builtin) : PyTuple_Pack(1, g_error);
    PyObject* cls = PyErr_NewException(qual.c_str(), bases, nullptr);
    Py_DECREF(bases);
    if (!cls) throw py::error_already_set();
    g_code_error[static_cast<int>(c.code)] = cls;
    m.attr(c.name) = py::handle(cls);
  }
  g_forked_error = PyErr_NewException("rwin.ForkedContextError", g_code_error[static_cast<int>(ErrorCode::InvalidArgument)], nullptr);
  m.attr("ForkedContextError") = py::handle(g_forked_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ForkedError& e) {
      set_error(g_forked_error, "InvalidArgument", e.what());
    } catch (const rwin::Error& e) {
      const int i = static_cast<int>(e.code());
      set_error(i >= 0 && i < kCodes ? g_code_error[i] : g_error, rwin::to_string(e.code()), e.what());
    }
  });

  // Element types: rwin.float32 ... are members of rwin.DType; numpy dtypes are accepted too.
  py::enum_<DType> dt(m, "DType");
  for (DType t : rwin::all_dtypes) dt.value(py_dtype_name(t), t);
  for (DType t : rwin::all_dtypes) m.attr(py_dtype_name(t)) = t;
  dt.def_property_readonly("itemsize", [](DType t) { return rwin::dtype_size(t); });
  py::module_ np = py::module_::import("numpy");
  for (DType t : rwin::all_dtypes) {
    const char* n = t == DType::BF16 ? "uint16" : py_dtype_name(t);
    g_np_dtype[static_cast<int>(t)] = np.attr("dtype")(n).release().ptr();
  }

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

  py::class_<RwBuffer>(m, "WindowBuffer")
      .def_property_readonly("name", [](const RwBuffer& b) { return b.b.name(); })
      .def_property_readonly("nbytes", [](const RwBuffer& b) { return b.b.bytes(); })
      .def_property_readonly("valid", [](const RwBuffer& b) { return b.b.valid(); })
      .def("__repr__", [](const RwBuffer& b) {
        if (!b.b.valid()) return std::string("<rwin.WindowBuffer (freed)>");
        return "<rwin.WindowBuffer '" + b.b.name() + "' " + std::to_string(b.b.bytes()) + " bytes>";
      });

  auto view_common = [](auto& cls) {
    cls.def_property_readonly("shape", [](const View& v) { return py::make_tuple(v.s.shape[0], v.s.shape[1]); })
        .def_property_readonly("dtype", [](const View& v) { return v.dtype; })
        .def_property_readonly("offsets", [](const View& v) { return py::make_tuple(v.s.offsets[0], v.s.offsets[1]); })
        .def_property_readonly("nbytes", [](const View& v) { return v.s.shape[0] * v.s.shape[1] * static_cast<int64_t>(v.esz); })
        .def("numpy", &numpy_view, "zero-copy numpy view of this rank's copy (bfloat16: uint16 of the same bytes)")
        .def("__array__", [](py::object self, py::object dtype, py::object) {
               py::array a = numpy_view(self);
               return dtype.is_none() ? py::object(a) : py::object(a.attr("astype")(dtype));
             }, py::arg("dtype") = py::none(), py::arg("copy") = py::none())
        .def("__getitem__", &make_slice)
        .def("__dlpack__", &dlpack, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
             py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
        .def("__dlpack_device__", [](py::object) { return py::make_tuple(1, 0); });
  };
  py::class_<View> view(m, "View");
  view_common(view);
  py::class_<RwWindow, View> window(m, "Window");
  window.def_property_readonly("name", [](const RwWindow& w) { return w.w.name(); })
      .def_property_readonly("offset", [](const RwWindow& w) { return w.w.byte_offset(); })
      .def_property_readonly("valid", [](const RwWindow& w) { return w.w.valid(); })
      .def("__repr__", [](const RwWindow& w) {
        if (!w.w.valid()) return std::string("<rwin.Window (freed)>");
        return "<rwin.Window '" + w.w.name() + "' " + py_dtype_name(w.dtype) + shape_text(w.wshape) + " at byte " +
               std::to_string(w.w.byte_offset()) + ">";
      });
  py::class_<RwSlice, View>(m, "Slice").def("__repr__", [](const RwSlice& s) {
    return std::string("<rwin.Slice ") + py_dtype_name(s.dtype) + shape_text(s.s.shape) + " at " +
           "(" + std::to_string(s.s.offsets[0]) + ", " + std::to_string(s.s.offsets[1]) + ") of " + shape_text(s.wshape) + ">";
  });

  py::class_<RwContext> context(m, "Context");
  context.def(py::init([](py::object rank, py::object nranks, py::object root, py::object transport, py::object timeout,
                       py::object startup_timeout, py::object ib_device) {
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
             {
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
           py::arg("ib_device") = py::none())
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
      });

  {
    py::object cls = m.attr("Context");
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
  bind_collectives(m, context);
  bind_agent(m);

  m.def("_fork_generation", [] { return g_fork_gen.load(); });

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

// rwin._rwin views: rwin.WindowBuffer, rwin.View and its kinds rwin.Window and rwin.Slice (x[0:1, 0:n]),
// their zero-copy numpy and DLPack exports, and numpy arrays as plain local operands of put/get.
//
// numpy views and DLPack capsules of a window point at the window's memory and keep the Python window
// object alive, but ctx.close() (or freeing the buffer) unmaps that memory: views must not outlive it.
#include "binding.h"

namespace rwin_py {

std::string shape_text(Shape2 s) { return "[" + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "]"; }

namespace {

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

}  // namespace

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

View& need_view(py::handle h, const char* what) {
  View* v = as_view(h);
  if (!v) {
    fail(ErrorCode::InvalidArgument, std::string(what) + ": expected an rwin Window or a Slice of one, got " +
                                         py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>());
  }
  return *v;
}

namespace {

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

}  // namespace

void bind_views(py::module_& m) {
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
}

}  // namespace rwin_py

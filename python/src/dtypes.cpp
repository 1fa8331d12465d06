// rwin._rwin element types: rwin.DType (rwin.float32 ... are its members), its names, and the
// numpy dtypes that match (a window's .numpy() view; numpy arrays as put/get operands).
#include "binding.h"

namespace rwin_py {

namespace {

// numpy dtype of a window's .numpy() view, per DType (bfloat16: uint16, the same bytes). Leaked on
// purpose: they must outlive interpreter finalisation order.
PyObject* g_np_dtype[12] = {};

}  // namespace

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

void bind_dtypes(py::module_& m) {
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
}

}  // namespace rwin_py

// rwin._rwin errors: rwin.Error and one subclass per rwin::ErrorCode (carrying .code, the code's name,
// and .message), rwin.ForkedContextError, and the translation of rwin::Error into them: pybind11's
// exception translator for bound calls, set_python_error() for the METH_FASTCALL ones (p2p.cpp).
#include "binding.h"

namespace rwin_py {

namespace {

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

}  // namespace

void set_python_error(const rwin::Error& e) {
  if (dynamic_cast<const ForkedError*>(&e)) {
    set_error(g_forked_error, "InvalidArgument", e.what());
    return;
  }
  const int i = static_cast<int>(e.code());
  set_error(i >= 0 && i < kCodes ? g_code_error[i] : g_error, rwin::to_string(e.code()), e.what());
}

void bind_errors(py::module_& m) {
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
    } catch (const rwin::Error& e) {
      set_python_error(e);
    }
  });
}

}  // namespace rwin_py

// Argument conversions shared by the bindings of rwin.Agent (agent.cpp) and rwin.Domain (domain.cpp):
// buffer-protocol views, WaitCmp / NotifyOp / seconds arguments.
#pragma once

#include <strings.h>

#include <cmath>
#include <cstring>

#include "binding.h"

namespace rwin_py {

inline std::string type_name(py::handle h) { return py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>(); }

// One acquired buffer-protocol view (C-contiguous), released by its destructor with the GIL held.
struct Buffer {
  Py_buffer v{};
  bool held = false;
  Buffer() = default;
  Buffer(py::handle obj, bool writable, const std::string& what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
    if (writable) flags |= PyBUF_WRITABLE;
    if (PyObject_GetBuffer(obj.ptr(), &v, flags) != 0) {
      std::string why = "not a buffer";
      if (PyErr_Occurred()) {
        py::error_already_set e;  // fetches and clears
        why = e.what();
      }
      fail(ErrorCode::InvalidArgument,
           what + ": expected a " + (writable ? "writable " : "") + "C-contiguous buffer (a numpy array, bytearray, ...), got " +
               type_name(obj) + " (" + why + ")");
    }
    held = true;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }
  void release() {
    if (held) PyBuffer_Release(&v);
    held = false;
  }
  void* data() const { return v.buf; }
  size_t bytes() const { return static_cast<size_t>(v.len); }
  // An int64 word type: numpy int64 ("l"/"q", 8 bytes), with or without a byte-order prefix.
  bool is_int64() const {
    if (v.itemsize != 8 || !v.format) return false;
    const char* f = v.format;
    if (*f == '@' || *f == '=' || *f == '<') ++f;
    return std::strcmp(f, "l") == 0 || std::strcmp(f, "q") == 0;
  }
  std::string format() const { return v.format ? v.format : "B"; }
};

inline rwin::WaitCmp cmp_arg(py::handle h) {
  if (py::isinstance<rwin::WaitCmp>(h)) return h.cast<rwin::WaitCmp>();
  if (py::isinstance<py::str>(h)) {
    const std::string s = h.cast<std::string>();
    static const char* names[][2] = {{"Eq", "=="}, {"Ne", "!="}, {"Gt", ">"}, {"Ge", ">="}, {"Lt", "<"}, {"Le", "<="}};
    for (int i = 0; i < 6; ++i) {
      if (s == names[i][1] || strcasecmp(s.c_str(), names[i][0]) == 0) return static_cast<rwin::WaitCmp>(i);
    }
  }
  fail(ErrorCode::InvalidArgument, "cmp must be an rwin.WaitCmp (Eq, Ne, Gt, Ge, Lt, Le) or one of \"==\", \"!=\", \">\", "
                                   "\">=\", \"<\", \"<=\", got " + py::repr(h).cast<std::string>());
}

inline rwin::NotifyOp op_arg(py::handle h) {
  if (py::isinstance<rwin::NotifyOp>(h)) return h.cast<rwin::NotifyOp>();
  fail(ErrorCode::InvalidArgument, "op must be an rwin.NotifyOp (AtomicAdd, Set), got " + py::repr(h).cast<std::string>());
}

inline std::chrono::milliseconds seconds_arg(py::handle t, const char* what) {
  const double s = t.cast<double>();
  if (!(s > 0) || std::isinf(s)) fail(ErrorCode::InvalidArgument, std::string(what) + " must be a positive, finite number of seconds, got " + py::repr(t).cast<std::string>());
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(s * 1000.0)));
}

}  // namespace rwin_py

// rwin.Context(store=obj, rank=r, nranks=n): a Python object as the job's rendezvous (issue 25,
// docs/EMBEDDING.md). The object needs torch.distributed.Store's methods, as torch has them, so a
// torch store works as it is:
//   set(key: str, value: bytes)            get(key: str) -> bytes (called once the key exists)
//   add(key: str, delta: int) -> int       check(keys: list[str]) -> bool (all exist)
//   wait(keys: list[str], timeout: datetime.timedelta)  returns once all exist, raises on timeout
// rwin calls them from the thread that uses the Context (the GIL is taken for each call). A wait that
// raises TimeoutError, or an exception whose message says "timeout"/"timed out", is a timeout (rwin
// asks again in its next slice until its own deadline); any other exception fails the rwin call.
#include "binding.h"

#include <cctype>

namespace rwin_py {

namespace {

class PyStore final : public rwin::Store {
 public:
  explicit PyStore(py::object obj) : obj_(std::move(obj)) {}
  ~PyStore() override {
    if (_Py_IsFinalizing()) {
      (void)obj_.release().ptr();  // no GIL to be had: leak the reference, the process is ending
      return;
    }
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    call("set", [&] {
      obj_.attr("set")(key, py::bytes(reinterpret_cast<const char*>(value.data()), value.size()));
    });
  }
  std::optional<std::vector<uint8_t>> get(const std::string& key, std::chrono::milliseconds timeout) override {
    if (!wait({key}, timeout)) return std::nullopt;
    std::vector<uint8_t> out;
    call("get", [&] {
      py::object v = obj_.attr("get")(key);
      std::string s = py::isinstance<py::str>(v) ? v.cast<std::string>() : std::string(v.cast<py::bytes>());
      out.assign(s.begin(), s.end());
    });
    return out;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t r = 0;
    call("add", [&] { r = obj_.attr("add")(key, delta).cast<int64_t>(); });
    return r;
  }
  bool check(const std::vector<std::string>& keys) override {
    bool r = false;
    call("check", [&] { r = obj_.attr("check")(py::cast(keys)).cast<bool>(); });
    return r;
  }
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    bool done = false;
    call("wait", [&] {
      py::object td = py::module_::import("datetime").attr("timedelta")(py::arg("milliseconds") = timeout.count());
      try {
        obj_.attr("wait")(py::cast(keys), td);
        done = true;
      } catch (py::error_already_set& e) {
        if (!is_timeout(e)) throw;
      }
    });
    return done;
  }

 private:
  static bool is_timeout(py::error_already_set& e) {
    if (e.matches(PyExc_TimeoutError)) return true;
    std::string m = py::str(e.value());
    for (auto& ch : m) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return m.find("timeout") != std::string::npos || m.find("timed out") != std::string::npos;
  }
  // Runs f with the GIL; a Python exception becomes a C++ one (made while the GIL is held).
  template <class F>
  void call(const char* what, F&& f) {
    if (_Py_IsFinalizing()) throw std::runtime_error(std::string("store.") + what + ": the interpreter is exiting");
    py::gil_scoped_acquire gil;
    try {
      f();
    } catch (py::error_already_set& e) {
      throw std::runtime_error(std::string("store.") + what + " raised " + e.what());
    } catch (const py::cast_error& e) {
      throw std::runtime_error(std::string("store.") + what + " returned a value of the wrong type: " + e.what());
    }
  }
  py::object obj_;
};

}  // namespace

std::shared_ptr<rwin::Store> make_py_store(py::object obj) {
  for (const char* m : {"set", "get", "add", "check", "wait"}) {
    if (!py::hasattr(obj, m)) {
      fail(ErrorCode::InvalidArgument, std::string("rwin.Context(store=...): the store (") +
                                           std::string(py::str(py::type::of(obj).attr("__name__"))) + ") has no " + m +
                                           "() method; it needs set, get, add, check and wait "
                                           "(torch.distributed.Store's shape)");
    }
  }
  return std::make_shared<PyStore>(std::move(obj));
}

}  // namespace rwin_py

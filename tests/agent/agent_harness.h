// Multi-process agent tests: independent processes (fork, no job, no shared state but a
// directory where descriptors are published as files, as a user's own channel would carry them).
// Children report through their exit code and stderr; every wait has a deadline.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rwin/agent.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace agent_test {

using namespace std::chrono_literals;

#define REQUIRE(cond)                                                                                       \
  do {                                                                                                      \
    if (!(cond)) throw std::runtime_error(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond); \
  } while (0)

// Runs f in a child process; its return value is the exit code (an exception: 2, printed).
inline pid_t spawn(const std::string& name, std::function<int()> f) {
  std::fflush(nullptr);
  const pid_t p = fork();
  if (p == 0) {
    int rc = 1;
    try {
      rc = f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[%s pid %d] failed: %s\n", name.c_str(), getpid(), e.what());
      rc = 2;
    } catch (...) {
      rc = 3;
    }
#if defined(__SANITIZE_ADDRESS__)
    // _exit skips LeakSanitizer's exit-time check: run it here, after the child's agent is gone.
    if (__lsan_do_recoverable_leak_check() != 0 && rc == 0) rc = 4;
#endif
    std::fflush(nullptr);
    _exit(rc);
  }
  return p;
}

// The exit code of `p` (a signal: 128 + signo), or -1 after killing it when `limit` passed.
inline int reap(pid_t p, std::chrono::seconds limit = 60s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(p, &st, WNOHANG);
    if (r == p) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (std::chrono::steady_clock::now() > end) {
      kill(p, SIGKILL);
      waitpid(p, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(5ms);
  }
}

// SIGSTOPs child `p` and returns once every thread of it has stopped (waitpid reports a group stop
// only then): a thread still running after kill(2) returned could take a peer's request and be
// frozen while writing its reply (docs/AGENT.md, "Peers killed over shared memory").
inline void stop_child(pid_t p, std::chrono::seconds limit = 30s) {
  if (kill(p, SIGSTOP) != 0) throw std::runtime_error("kill(SIGSTOP) failed");
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(p, &st, WNOHANG | WUNTRACED);
    if (r == p && WIFSTOPPED(st)) return;
    if (r == p) throw std::runtime_error("child ended instead of stopping");
    if (std::chrono::steady_clock::now() > end) throw std::runtime_error("child did not stop within the limit");
    std::this_thread::sleep_for(1ms);
  }
}

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/rwin-agent-XXXXXX";
    if (!mkdtemp(t)) throw std::runtime_error("mkdtemp failed");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string at(const std::string& name) const { return path + "/" + name; }
};

inline void publish(const TempDir& d, const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string tmp = d.at(name + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::rename(tmp, d.at(name));
}
inline void publish(const TempDir& d, const std::string& name, const std::string& text = "x") {
  publish(d, name, std::vector<uint8_t>(text.begin(), text.end()));
}
inline bool exists(const TempDir& d, const std::string& name) {
  struct stat st{};
  return ::stat(d.at(name).c_str(), &st) == 0;
}

// Waits for a published file; progresses `a` meanwhile (so this process keeps serving its peers
// and answering revocations), or only sleeps when a is null.
inline std::vector<uint8_t> await(const TempDir& d, const std::string& name, rwin::Agent* a = nullptr,
                                  std::chrono::seconds limit = 30s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!exists(d, name)) {
    if (std::chrono::steady_clock::now() > end) throw std::runtime_error("no file '" + name + "' within the limit");
    if (a) {
      a->progress();
      std::this_thread::sleep_for(100us);
    } else {
      std::this_thread::sleep_for(2ms);
    }
  }
  std::ifstream f(d.at(name), std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs fn, which must throw rwin::Error with `code` and a message containing every `parts`.
template <class F>
std::string expect_error(F fn, rwin::ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const rwin::Error& e) {
    const std::string m = e.what();
    if (e.code() != code) throw std::runtime_error("wrong error code " + std::to_string(int(e.code())) + ": " + m);
    for (const auto& p : parts) {
      if (m.find(p) == std::string::npos) throw std::runtime_error("error lacks '" + p + "': " + m);
    }
    return m;
  }
  throw std::runtime_error("no error thrown");
}

inline int open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

inline rwin::AgentOptions options(bool progress_thread = false) {
  rwin::AgentOptions o;
  o.listen = "127.0.0.1:0";
  o.op_timeout = 20s;
  o.connect_timeout = 10s;
  o.progress_thread = progress_thread;
  // The same tests over another transport (verbs in the rxe guest): AGENT_TEST_TRANSPORT=verbs.
  if (const char* t = std::getenv("AGENT_TEST_TRANSPORT"); t && *t) o.transport = t;
  return o;
}

// The lanes the multi-process agent tests run on: a UCX lane (UCX_TLS, UCX_NET_DEVICES) or rwin's
// own tcp transport (transport "tcp"). A UCX lane keeps the transport the caller chose from outside
// (AGENT_TEST_TRANSPORT=verbs in the soft-RoCE guest).
struct Tls {
  const char* name;
  const char* ucx_tls;
  const char* net_devices;         // nullptr: unset
  const char* transport = nullptr;  // nullptr: the outer AGENT_TEST_TRANSPORT (ucx when unset)
};

inline void use_tls(const Tls& t) {
  static const std::string outer = std::getenv("AGENT_TEST_TRANSPORT") ? std::getenv("AGENT_TEST_TRANSPORT") : "";
  setenv("UCX_TLS", t.ucx_tls, 1);
  if (t.net_devices) {
    setenv("UCX_NET_DEVICES", t.net_devices, 1);
  } else {
    unsetenv("UCX_NET_DEVICES");
  }
  if (t.transport) {
    setenv("AGENT_TEST_TRANSPORT", t.transport, 1);
  } else if (outer.empty()) {
    unsetenv("AGENT_TEST_TRANSPORT");
  } else {
    setenv("AGENT_TEST_TRANSPORT", outer.c_str(), 1);
  }
}

inline const Tls kOwnTcp{"owntcp", "tcp,self", "lo", "tcp"};  // rwin's own tcp transport (UCX unused)

inline uint8_t pattern(size_t i, uint8_t seed) { return static_cast<uint8_t>(i * 131 + seed + (i >> 9)); }

}  // namespace agent_test

// What the store's two test files (test_store.cpp: protocol and robustness; test_store_auth.cpp:
// keys, leases, deadlines) both need to talk to a TcpStore by hand: one copy, so the sanitizer
// trees' unity batches, which compile both files in one unit, see each helper once.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "socket_util.h"

namespace store_test {

namespace rb = rwin::bootstrap;

inline rb::Bytes bytes(const std::string& s) { return rb::Bytes(s.begin(), s.end()); }
inline rb::HostPort local(uint16_t port) { return rb::HostPort{"127.0.0.1", port}; }
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline uint16_t free_port() {
  const uint16_t port = test_sock::free_port();
  EXPECT_NE(port, 0) << "no free loopback port";
  return port;
}

// The BootstrapError `f` throws; a test failure (and a Config error) if it throws none.
template <class F>
rb::BootstrapError expect_error(F&& f) {
  try {
    f();
  } catch (const rb::BootstrapError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a BootstrapError";
  return rb::BootstrapError(rb::BootstrapError::Kind::Config, "");
}

// A raw TCP connection, for feeding the server bytes no TcpStore would send.
class RawConn {
 public:
  explicit RawConn(uint16_t port) : fd_(test_sock::connect_loopback(port)) { EXPECT_GE(fd_, 0) << std::strerror(errno); }
  ~RawConn() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  int fd() const { return fd_; }
  // Whether all of `b` went out (a server that already closed may refuse part of it).
  bool send(const std::vector<uint8_t>& b) {
    return ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Reads until the server closes; true if it did before `timeout`. `got` counts bytes received.
  bool closed_by_server(std::chrono::milliseconds timeout, size_t* got = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t n = 0;
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, rb::wire::ms_left(deadline)) != 1) return false;
      char buf[4096];
      const ssize_t k = ::recv(fd_, buf, sizeof buf, 0);
      if (k <= 0) break;
      n += static_cast<size_t>(k);
    }
    if (got) *got = n;
    return true;
  }

 private:
  int fd_;
};

// Runs body(rank) on `n` threads; returns each rank's exception message ("" = success).
inline std::vector<std::string> run_ranks(int n, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace store_test

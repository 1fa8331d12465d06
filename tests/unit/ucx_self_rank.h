// A one-rank UCX transport talking to itself, for transport-level unit tests: posts one Work and
// polls (bounded) for its single completion.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/transport.h"

namespace rwin_test {

struct UcxSelfRank {
  rwin::bootstrap::Bootstrap bs{0, 1, rwin::bootstrap::HostPort::parse("127.0.0.1:0"), std::chrono::milliseconds(10000)};
  std::unique_ptr<rwin::transport::Transport> tp;
  explicit UcxSelfRank(const std::string& rma_mode) {
    rwin::transport::TransportConfig cfg;
    cfg.name = "ucx";
    cfg.ucx_rma = rma_mode;
    tp = rwin::transport::make_transport(cfg);
    tp->connect(bs);
  }
  rwin::transport::Completion run(rwin::transport::Work w) {
    w.peer = 0;
    std::vector<rwin::transport::Completion> done;
    EXPECT_EQ(tp->post(w), rwin::transport::PostResult::Ok);
    for (int i = 0; i < 10000000 && done.empty(); ++i) tp->poll(done);
    EXPECT_EQ(done.size(), 1u) << "exactly one completion per accepted work";
    if (done.empty()) return rwin::transport::Completion{w.cookie, false, "no completion"};
    EXPECT_EQ(done[0].cookie, w.cookie);
    return done[0];
  }
};

// A Work to self (peer 0).
inline rwin::transport::Work self_work(rwin::transport::Op op, void* local, const rwin::transport::MemoryRegion* mr,
                                       uint64_t addr, const rwin::transport::RemoteKey* rkey, size_t bytes,
                                       uint64_t operand = 0, uint64_t compare = 0) {
  rwin::transport::Work w;
  w.op = op;
  w.peer = 0;
  w.local = local;
  w.local_mr = mr;
  w.remote_addr = addr;
  w.rkey = rkey;
  w.bytes = bytes;
  w.operand = operand;
  w.compare = compare;
  w.cookie = 77;
  return w;
}

}  // namespace rwin_test

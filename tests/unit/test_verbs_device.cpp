// Device selection errors of the verbs transport. On a host without RDMA devices the factory must
// say so and point at the fixes; with a device (inside the rxe guest) asking for a device or GID
// that does not exist must name what was found. Both branches assert: whichever applies runs.
#include <gtest/gtest.h>

#if __has_include(<infiniband/verbs.h>)
#include <string>

#include "transport/verbs/verbs_transport.h"

namespace {

using rwin::transport::TransportConfig;
using rwin::transport::TransportError;

std::string error_of(const TransportConfig& cfg) {
  try {
    auto t = rwin::transport::make_verbs_transport(cfg);
  } catch (const TransportError& e) {
    return e.what();
  }
  return {};
}

TEST(VerbsDevice, NoDeviceOrUnknownDeviceIsExplained) {
  TransportConfig cfg;
  cfg.name = "verbs";
  if (rwin::transport::verbs_device_count() == 0) {
    const std::string e = error_of(cfg);
    EXPECT_NE(e.find("no rdma devices found (ibv_get_device_list returned 0 devices"), std::string::npos) << e;
    EXPECT_NE(e.find("load rdma_rxe or use RWIN_TRANSPORT=ucx"), std::string::npos) << e;
    return;
  }
  cfg.ib_device = "no_such_dev0";
  const std::string e = error_of(cfg);
  EXPECT_NE(e.find("no usable rdma device (wanted no_such_dev0"), std::string::npos) << e;
  EXPECT_NE(e.find("(not requested)"), std::string::npos) << "lists the devices it saw: " << e;
}

TEST(VerbsDevice, BadPortOrGidIndexIsExplained) {
  if (rwin::transport::verbs_device_count() == 0) GTEST_SKIP() << "needs an RDMA device (run under tests/rxe)";
  TransportConfig cfg;
  cfg.name = "verbs";
  cfg.ib_port = 9;
  std::string e = error_of(cfg);
  EXPECT_NE(e.find("not 9"), std::string::npos) << e;
  cfg.ib_port = 1;
  cfg.gid_index = 100000;
  e = error_of(cfg);
  EXPECT_NE(e.find("gid index 100000 out of range"), std::string::npos) << e;
  cfg.gid_index = 1000;  // inside rxe's 1024-entry table, but empty
  e = error_of(cfg);
  EXPECT_NE(e.find("gid index 1000"), std::string::npos) << e;
  cfg.gid_index = -1;
  EXPECT_EQ(error_of(cfg), "") << "auto gid choice must work where a device exists";
}

}  // namespace
#endif

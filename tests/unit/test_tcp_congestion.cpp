// RWIN_TCP_CONGESTION: which congestion control rwin's own tcp connections get (transport/tcp/
// tcp_congestion.cpp), and that a value the kernel cannot give is refused at start-up, named.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "env_guard.h"
#include "tcp_pair.h"
#include "transport/tcp/tcp_congestion.h"
#include "transport/tcp/tcp_transport_impl.h"

namespace {

namespace tp = rwin::transport;

std::string proc_value(const char* path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

bool listed(const std::string& list, const std::string& name) {
  std::istringstream in(list);
  for (std::string w; in >> w;) {
    if (w == name) return true;
  }
  return false;
}

std::string refusal(const char* value) {
  try {
    (void)tp::tcp::resolve_congestion(value);
  } catch (const tp::TransportError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(TcpCongestion, SystemLeavesTheKernelsAndANamedOneIsTaken) {
  EXPECT_EQ(tp::tcp::resolve_congestion("system"), "");
  EXPECT_EQ(tp::tcp::resolve_congestion("reno"), "reno");  // built in, and open to every process
}

// auto replaces bbr, the kernel's default on this kind of machine, and nothing else.
TEST(TcpCongestion, AutoReplacesOnlyBbrWithCubicWhereThisProcessMay) {
  const std::string dflt = proc_value("/proc/sys/net/ipv4/tcp_congestion_control");
  ASSERT_FALSE(dflt.empty());
  const std::string got = tp::tcp::resolve_congestion(nullptr);
  EXPECT_EQ(tp::tcp::resolve_congestion("auto"), got);
  if (dflt != "bbr") {
    EXPECT_EQ(got, "") << "the kernel's default is " << dflt;
    return;
  }
  const bool may = geteuid() == 0 || listed(proc_value("/proc/sys/net/ipv4/tcp_allowed_congestion_control"), "cubic");
  EXPECT_EQ(got, may ? "cubic" : "");
}

TEST(TcpCongestion, AValueTheKernelCannotGiveIsRefusedNamingItAndWhatThereIs) {
  const std::string odd = refusal("Bad Name!");
  EXPECT_NE(odd.find("RWIN_TCP_CONGESTION is 'Bad Name!'"), std::string::npos) << odd;
  EXPECT_NE(odd.find("want auto, system or an algorithm's name"), std::string::npos) << odd;
  const std::string missing = refusal("nosuchcc");
  EXPECT_NE(missing.find("RWIN_TCP_CONGESTION is 'nosuchcc': this kernel has no such algorithm (it has: "),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("reno"), std::string::npos) << missing;
  EXPECT_NE(refusal("averyveryverylongname").find("want auto, system or"), std::string::npos);
}

// Both ends of a connection: the dialling rank's socket and the accepted one.
TEST(TcpCongestion, EveryDataConnectionGetsTheChosenAlgorithm) {
  rwin::test::EnvGuard env;
  env.set("RWIN_TCP_CONGESTION", "reno");
  rwin_tcp_test::Pair p;
  for (int me = 0; me < 2; ++me) {
    const auto& t = dynamic_cast<tp::tcp::TcpTransport&>(*p.r[me].t);
    EXPECT_EQ(t.congestion_of(1 - me), "reno") << "rank " << me;
  }
  env.set("RWIN_TCP_CONGESTION", "system");
  rwin_tcp_test::Pair q;
  const std::string dflt = proc_value("/proc/sys/net/ipv4/tcp_congestion_control");
  for (int me = 0; me < 2; ++me) {
    const auto& t = dynamic_cast<tp::tcp::TcpTransport&>(*q.r[me].t);
    EXPECT_EQ(t.congestion_of(1 - me), dflt) << "rank " << me;
  }
}

TEST(TcpCongestion, ATransportWithAnImpossibleValueIsNotMade) {
  const std::string err = rwin_tcp_test::start_up_error("RWIN_TCP_CONGESTION", "nosuchcc");
  EXPECT_NE(err.find("RWIN_TCP_CONGESTION is 'nosuchcc'"), std::string::npos) << (err.empty() ? "accepted" : err);
}

}  // namespace

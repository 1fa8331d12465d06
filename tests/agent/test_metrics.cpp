// An agent's Prometheus metrics (issue 28 item 3; docs/OBSERVING.md, "Metrics"): a scrape over a plain
// socket after a known sequence of calls to a peer agent (exact counter values, over UCX tcp and
// shared memory), the file form written and parsed, malformed specs refused naming the knob and the
// value, and strangers sending garbage to the HTTP port. Nothing is timed: every wait has a deadline.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "agent_harness.h"

using namespace agent_test;
using rwin::Agent;
using rwin::ErrorCode;
using rwin::NotifyOp;
using rwin::Region;
using rwin::RemoteRegion;
using rwin::WaitCmp;

namespace {

// ---- a plain HTTP client and a text-format parser, independent of rwin's code ----

// A connected TCP socket to "host:port" (IPv4 dotted quad), every read and write bounded by 20 s.
int dial(const std::string& addr) {
  const auto colon = addr.rfind(':');
  REQUIRE(colon != std::string::npos);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(colon + 1))));
  REQUIRE(inet_pton(AF_INET, addr.substr(0, colon).c_str(), &sa.sin_addr) == 1);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  timeval tv{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot connect to " + addr + ": " + std::strerror(errno));
  }
  return fd;
}

void send_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

// Everything until the server closes (a read timeout is an error: the server hung).
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return out;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) return out;
      throw std::runtime_error(std::string("recv: ") + std::strerror(errno) + " after " + std::to_string(out.size()) +
                               " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

struct Reply {
  int status = 0;
  std::string headers;  // lower-cased
  std::string body;
};

// One HTTP/1.0 request ("Connection: close"): the server answers and closes.
Reply http(const std::string& addr, const std::string& method, const std::string& path) {
  const int fd = dial(addr);
  std::string raw;
  try {
    send_all(fd, method + " " + path + " HTTP/1.0\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n");
    raw = read_all(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  Reply r;
  const auto end = raw.find("\r\n\r\n");
  REQUIRE(end != std::string::npos);
  REQUIRE(raw.rfind("HTTP/1.", 0) == 0);
  r.status = std::stoi(raw.substr(9, 3));
  r.headers = raw.substr(0, end);
  for (char& c : r.headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  r.body = raw.substr(end + 4);
  return r;
}

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The text exposition format 0.0.4, strictly: every sample's family has HELP and TYPE lines before
// it, once each; label values unescaped; no blank lines; a newline at the end.
std::vector<Sample> parse(const std::string& text) {
  std::vector<Sample> out;
  std::set<std::string> helped, typed;
  REQUIRE(!text.empty() && text.back() == '\n');
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    REQUIRE(!line.empty());
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      std::istringstream l(line.substr(7));
      std::string fam, rest;
      l >> fam >> rest;
      REQUIRE(!rest.empty());
      auto& seen = line[2] == 'H' ? helped : typed;
      REQUIRE(seen.insert(fam).second);  // once per family
      if (line[2] == 'T') REQUIRE(rest == "counter" || rest == "gauge");
      if (line[2] == 'T' && rest == "counter") REQUIRE(fam.size() > 6 && fam.substr(fam.size() - 6) == "_total");
      continue;
    }
    REQUIRE(line[0] != '#');
    Sample s;
    size_t i = line.find('{');
    REQUIRE(i != std::string::npos);
    s.name = line.substr(0, i);
    REQUIRE(helped.count(s.name) == 1 && typed.count(s.name) == 1);
    ++i;
    while (line[i] != '}') {
      const size_t eq = line.find('=', i);
      REQUIRE(eq != std::string::npos && line[eq + 1] == '"');
      const std::string key = line.substr(i, eq - i);
      std::string val;
      size_t j = eq + 2;
      for (; line.at(j) != '"'; ++j) {
        if (line[j] == '\\') {
          ++j;
          val += line.at(j) == 'n' ? '\n' : line[j];
        } else {
          val += line[j];
        }
      }
      REQUIRE(s.labels.emplace(key, val).second);
      i = j + 1;
      if (line[i] == ',') ++i;
    }
    REQUIRE(line.at(i + 1) == ' ');
    s.value = std::stod(line.substr(i + 2));
    out.push_back(std::move(s));
  }
  return out;
}

// The value of the one sample of `name` whose labels include `want`; throws when none or several.
double value(const std::vector<Sample>& ss, const std::string& name, std::map<std::string, std::string> want = {}) {
  const Sample* hit = nullptr;
  for (const auto& s : ss) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : want) ok = ok && s.labels.count(k) && s.labels.at(k) == v;
    if (!ok) continue;
    if (hit) throw std::runtime_error("several samples of " + name);
    hit = &s;
  }
  if (!hit) {
    std::string w;
    for (const auto& [k, v] : want) w += " " + k + "=" + v;
    throw std::runtime_error("no sample " + name + w);
  }
  return hit->value;
}

std::vector<Sample> scrape(const std::string& addr) {
  const Reply r = http(addr, "GET", "/metrics");
  REQUIRE(r.status == 200);
  REQUIRE(r.headers.find("content-type: text/plain; version=0.0.4") != std::string::npos);
  return parse(r.body);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

class MetricsMp : public ::testing::TestWithParam<Tls> {
 protected:
  void SetUp() override { use_tls(GetParam()); }
  TempDir dir;
};

// Single-process tests: one agent, no peer; UCX over tcp on loopback.
class Metrics : public ::testing::Test {
 protected:
  void SetUp() override {
    use_tls({"tcp", "tcp,self", "lo"});
    unsetenv("RWIN_METRICS");
    unsetenv("RWIN_METRICS_INTERVAL_MS");
  }
  void TearDown() override {
    unsetenv("RWIN_METRICS");
    unsetenv("RWIN_METRICS_INTERVAL_MS");
  }
  TempDir dir;
};

// A known sequence of calls from a client agent to a server agent; the client's scrape gives their
// exact counts (calls are counted before they return), the server's its regions and its inbound peer.
TEST_P(MetricsMp, ScrapeCountsEveryCall) {
  const pid_t server = spawn("server", [&] {
    std::vector<uint8_t> data(1 << 16);
    alignas(64) int64_t sig[8] = {};
    auto o = options(/*progress_thread=*/true);
    o.metrics = "127.0.0.1:0";
    Agent a(o);
    const std::string m = a.metrics_address();
    REQUIRE(m.rfind("127.0.0.1:", 0) == 0 && m != "127.0.0.1:0");
    Region rd = a.register_memory(data.data(), data.size());
    Region rs = a.register_memory(sig, sizeof sig);
    publish(dir, "s.data", rd.descriptor());
    publish(dir, "s.sig", rs.descriptor());
    publish(dir, "s.addr", a.address());
    await(dir, "c.ops");
    // The client's 3 Adds and 1 Set landed (the Set last: 7).
    a.wait(rs, 0, 3, WaitCmp::EQ, 20s);
    a.wait(rs, 8, 7, WaitCmp::EQ, 20s);
    // The client's handshake is complete at its end; ours completes when its Ready is read: wait for it.
    std::vector<Sample> ss;
    const auto end = std::chrono::steady_clock::now() + 20s;
    do {
      ss = scrape(m);
      if (value(ss, "rwin_agent_peers", {{"direction", "inbound"}}) == 1) break;
      std::this_thread::sleep_for(5ms);
    } while (std::chrono::steady_clock::now() < end);
    REQUIRE(value(ss, "rwin_agent_peers", {{"direction", "inbound"}}) == 1);
    REQUIRE(value(ss, "rwin_agent_peers_connected_total", {{"direction", "inbound"}}) == 1);
    REQUIRE(value(ss, "rwin_agent_peers", {{"direction", "outbound"}}) == 0);
    REQUIRE(value(ss, "rwin_agent_regions") == 2);
    REQUIRE(value(ss, "rwin_agent_regions_registered_total") == 2);
    REQUIRE(value(ss, "rwin_agent_regions_deregistered_total") == 0);
    REQUIRE(value(ss, "rwin_agent_operations_total", {{"op", "wait"}}) == 2);
    REQUIRE(value(ss, "rwin_agent_operations_total", {{"op", "put"}}) == 0);  // what peers did is not counted
    REQUIRE(value(ss, "rwin_agent_info", {{"agent", a.address()}}) == 1);
    publish(dir, "s.checked");
    await(dir, "c.done");
    return 0;
  });
  const pid_t client = spawn("client", [&] {
    auto o = options();
    o.metrics = "127.0.0.1:0";
    Agent a(o);
    const std::string m = a.metrics_address();
    const std::vector<uint8_t> pa = await(dir, "s.addr");
    const std::string peer(pa.begin(), pa.end());
    // Before any call: every counter is there, at 0.
    {
      auto ss = scrape(m);
      REQUIRE(value(ss, "rwin_agent_operations_total", {{"agent", a.address()}, {"op", "put"}}) == 0);
      REQUIRE(value(ss, "rwin_agent_imports_total") == 0);
      REQUIRE(value(ss, "rwin_agent_info", {{"agent", a.address()}}) == 1);
    }
    RemoteRegion d = a.import_region(await(dir, "s.data", &a));
    RemoteRegion s = a.import_region(await(dir, "s.sig", &a));
    REQUIRE(d.peer() == peer);
    std::vector<uint8_t> buf(4096, 5);
    a.put(d, 0, buf.data(), 1000);
    a.put(d, 1000, buf.data(), 1000);
    a.put(d, 2000, buf.data(), 1000);
    a.get(buf.data(), d, 0, 500);
    a.get(buf.data(), d, 100, 500);
    a.put_notify(d, 8192, buf.data(), 100, s, 16, 1);  // sig[2]
    for (int i = 0; i < 3; ++i) a.notify(s, 0, 1);     // sig[0] += 1 (AtomicAdd)
    a.notify(s, 8, 7, NotifyOp::Set);
    a.flush();
    expect_error([&] { a.put(d, (1 << 16) - 10, buf.data(), 11); }, ErrorCode::OutOfBounds, {"put of 11 bytes"});
    expect_error([&] { a.notify(s, 4, 1); }, ErrorCode::Misaligned, {"offset 4"});
    publish(dir, "c.ops");

    const auto ss = scrape(m);
    const auto op = [&](const char* name, const char* o2) { return value(ss, name, {{"op", o2}}); };
    REQUIRE(op("rwin_agent_operations_total", "put") == 3);
    REQUIRE(op("rwin_agent_operations_total", "get") == 2);
    REQUIRE(op("rwin_agent_operations_total", "put_notify") == 1);
    REQUIRE(op("rwin_agent_operations_total", "notify") == 4);
    REQUIRE(op("rwin_agent_operations_total", "flush") == 1);
    REQUIRE(op("rwin_agent_operations_total", "wait") == 0);
    REQUIRE(op("rwin_agent_operations_total", "test") == 0);
    REQUIRE(op("rwin_agent_bytes_total", "put") == 3000);
    REQUIRE(op("rwin_agent_bytes_total", "get") == 1000);
    REQUIRE(op("rwin_agent_bytes_total", "put_notify") == 100);
    REQUIRE(op("rwin_agent_errors_total", "put") == 1);
    REQUIRE(op("rwin_agent_errors_total", "notify") == 1);
    REQUIRE(op("rwin_agent_errors_total", "get") == 0);
    REQUIRE(value(ss, "rwin_agent_imports_total") == 2);
    REQUIRE(value(ss, "rwin_agent_regions") == 0);
    REQUIRE(value(ss, "rwin_agent_peers", {{"direction", "outbound"}}) == 1);
    REQUIRE(value(ss, "rwin_agent_peers_connected_total", {{"direction", "outbound"}}) == 1);
    REQUIRE(value(ss, "rwin_agent_peer_failures_total", {{"direction", "outbound"}}) == 0);
    REQUIRE(value(ss, "rwin_agent_refused_total") == 0);
    // By peer: the server's control address.
    const auto pv = [&](const char* name, const char* o2) { return value(ss, name, {{"peer", peer}, {"op", o2}}); };
    REQUIRE(pv("rwin_agent_peer_operations_total", "put") == 3);
    REQUIRE(pv("rwin_agent_peer_operations_total", "get") == 2);
    REQUIRE(pv("rwin_agent_peer_operations_total", "put_notify") == 1);
    REQUIRE(pv("rwin_agent_peer_operations_total", "notify") == 4);
    REQUIRE(pv("rwin_agent_peer_bytes_total", "put") == 3000);
    REQUIRE(pv("rwin_agent_peer_bytes_total", "get") == 1000);
    REQUIRE(pv("rwin_agent_peer_bytes_total", "put_notify") == 100);
    // Every sample carries agent="<control address>".
    for (const auto& x : ss) REQUIRE(x.labels.count("agent") && x.labels.at("agent") == a.address());
    // AgentStats says the same.
    const rwin::AgentStats st = a.stats();
    REQUIRE(st.puts == 3 && st.put_bytes == 3000 && st.gets == 2 && st.get_bytes == 1000);
    REQUIRE(st.put_notifies == 1 && st.put_notify_bytes == 100 && st.notifies == 4 && st.flushes == 1);
    REQUIRE(st.errors == 2 && st.imports == 2 && st.peers == 1 && st.peers_connected == 1);
    // Only GET (and HEAD) /metrics.
    REQUIRE(http(m, "GET", "/").status == 404);
    REQUIRE(http(m, "GET", "/metrics/x").status == 404);
    REQUIRE(http(m, "POST", "/metrics").status == 405);
    const Reply h = http(m, "HEAD", "/metrics");
    REQUIRE(h.status == 200 && h.body.empty());
    await(dir, "s.checked", &a);
    publish(dir, "c.done");
    return 0;
  });
  EXPECT_EQ(reap(client), 0);
  EXPECT_EQ(reap(server), 0);
}

INSTANTIATE_TEST_SUITE_P(Ucx, MetricsMp,
                         ::testing::Values(Tls{"tcp", "tcp,self", "lo"}, Tls{"shm", "posix,sysv,self", nullptr}),
                         [](const auto& p) { return std::string(p.param.name); });
// rwin's own tcp transport (transport/tcp/): the same tests, its receiver thread serving the passive side.
INSTANTIATE_TEST_SUITE_P(Own, MetricsMp, ::testing::Values(kOwnTcp), [](const auto& p) { return std::string(p.param.name); });

// The file form: written at construction, rewritten, and written a last time at close (regions 0).
TEST_F(Metrics, FileForm) {
  const std::string pattern_path = dir.at("agent-%p.prom");
  const std::string path = dir.at("agent-" + std::to_string(getpid()) + ".prom");
  std::vector<uint8_t> mem(8192);
  std::string address;
  {
    auto o = options();
    o.metrics = "file:" + pattern_path;
    o.metrics_interval = 3600s;  // only the first and the last write happen during the test
    Agent a(o);
    address = a.address();
    EXPECT_EQ(a.metrics_address(), "file:" + path);
    auto first = parse(slurp(path));  // written before the constructor returned
    EXPECT_EQ(value(first, "rwin_agent_regions"), 0);
    EXPECT_EQ(value(first, "rwin_agent_info", {{"agent", address}}), 1);
    Region r1 = a.register_memory(mem.data(), 4096);
    Region r2 = a.register_memory(mem.data() + 4096, 4096);
    r1.deregister();
    // No temporary file left beside it.
    int files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path)) ++files;
    EXPECT_EQ(files, 1);
  }
  auto last = parse(slurp(path));
  EXPECT_EQ(value(last, "rwin_agent_regions_registered_total", {{"agent", address}}), 2);
  EXPECT_EQ(value(last, "rwin_agent_regions_deregistered_total"), 1);  // r1; r2 was registered until the end
  EXPECT_EQ(value(last, "rwin_agent_regions"), 0);                   // closed: nothing registered
  EXPECT_EQ(value(last, "rwin_agent_operations_total", {{"op", "put"}}), 0);
}

// RWIN_METRICS and RWIN_METRICS_INTERVAL_MS: the file rewritten on its interval (waited for, not timed).
TEST_F(Metrics, FileFormFromTheEnvironment) {
  const std::string path = dir.at("env.prom");
  setenv("RWIN_METRICS", ("file:" + path).c_str(), 1);
  setenv("RWIN_METRICS_INTERVAL_MS", "5", 1);
  std::vector<uint8_t> mem(4096);
  Agent a(options());
  EXPECT_EQ(a.metrics_address(), "file:" + path);
  EXPECT_EQ(value(parse(slurp(path)), "rwin_agent_regions"), 0);
  Region r = a.register_memory(mem.data(), mem.size());
  const auto end = std::chrono::steady_clock::now() + 30s;
  double regions = 0;
  while (std::chrono::steady_clock::now() < end) {
    regions = value(parse(slurp(path)), "rwin_agent_regions");  // rename: never half a file
    if (regions == 1) break;
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(regions, 1);
  // The option wins over the variable; "off" turns the variable off.
  auto o = options();
  o.metrics = "off";
  Agent b(o);
  EXPECT_EQ(b.metrics_address(), "");
}

TEST_F(Metrics, OffByDefault) {
  Agent a(options());
  EXPECT_EQ(a.metrics_address(), "");
}

// Malformed specs: InvalidArgument naming the knob (or the option) and the value, before anything is
// made; an address in use or a path that cannot be written: the agent is not made either.
TEST_F(Metrics, BadSpecsAreRefused) {
  const auto bad_option = [&](const std::string& spec, std::initializer_list<std::string> parts,
                              ErrorCode code = ErrorCode::InvalidArgument) {
    auto o = options();
    o.metrics = spec;
    std::vector<std::string> all{"AgentOptions::metrics='" + spec + "'"};
    all.insert(all.end(), parts.begin(), parts.end());
    try {
      Agent a(o);
      ADD_FAILURE() << "no error for " << spec;
    } catch (const rwin::Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      for (const auto& p : all) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
    }
  };
  bad_option("9464", {"no ':port'", "expected [http://]HOST:PORT"});
  bad_option("localhost", {"no ':port'"});
  bad_option("https://127.0.0.1:9464", {"only the http:// scheme"});
  bad_option("http://127.0.0.1:9464/metrics", {"no path"});
  bad_option("127.0.0.1:65536", {"not a port number"});
  bad_option("127.0.0.1:", {"empty port"});
  bad_option("127.0.0.1:x1", {"not a port number"});
  bad_option("file:", {"no path after 'file:'"});
  bad_option("file:" + dir.at("missing/dir/m.prom"), {"cannot create"}, ErrorCode::Transport);
  // A port in use: bound here first.
  {
    auto o = options();
    o.metrics = "127.0.0.1:0";
    Agent a(o);
    bad_option(a.metrics_address(), {"cannot listen on " + a.metrics_address()});
  }
  // The variable's errors name the variable.
  setenv("RWIN_METRICS", "bogus", 1);
  expect_error([&] { Agent a(options()); }, ErrorCode::InvalidArgument, {"RWIN_METRICS='bogus'", "no ':port'"});
  setenv("RWIN_METRICS", "http://127.0.0.1:9464/", 1);
  expect_error([&] { Agent a(options()); }, ErrorCode::InvalidArgument, {"RWIN_METRICS='http://127.0.0.1:9464/'", "no path"});
  setenv("RWIN_METRICS", ("file:" + dir.at("x.prom")).c_str(), 1);
  for (const char* v : {"0", "abc", "-5", "86400001"}) {
    setenv("RWIN_METRICS_INTERVAL_MS", v, 1);
    expect_error([&] { Agent a(options()); }, ErrorCode::InvalidArgument,
                 {std::string("RWIN_METRICS_INTERVAL_MS='") + v + "'", "[1, 86400000]"});
  }
  unsetenv("RWIN_METRICS_INTERVAL_MS");
  unsetenv("RWIN_METRICS");
  // Extra labels must be Prometheus label names and not the metrics' own.
  auto o = options();
  o.metrics = "127.0.0.1:0";
  o.metrics_labels = {{"0bad", "x"}};
  expect_error([&] { Agent a(o); }, ErrorCode::InvalidArgument, {"metrics_labels", "'0bad'"});
  o.metrics_labels = {{"peer", "x"}};
  expect_error([&] { Agent a(o); }, ErrorCode::InvalidArgument, {"metrics_labels", "'peer'"});
  // Good ones are on every sample, escaped.
  o.metrics_labels = {{"service", "tensor \"a\"\\b"}};
  Agent a(o);
  for (const auto& s : scrape(a.metrics_address())) EXPECT_EQ(s.labels.at("service"), "tensor \"a\"\\b");
}

// ":PORT" and "http://" forms bind 127.0.0.1.
TEST_F(Metrics, AddressForms) {
  for (const char* spec : {":0", "http://127.0.0.1:0", "127.0.0.1:0"}) {
    auto o = options();
    o.metrics = spec;
    Agent a(o);
    EXPECT_EQ(a.metrics_address().rfind("127.0.0.1:", 0), 0u) << spec << ": " << a.metrics_address();
    EXPECT_EQ(value(scrape(a.metrics_address()), "rwin_agent_regions"), 0);
  }
}

// Strangers on the metrics port: garbage, half a request, a huge request line, an idle connection,
// a client that closes without reading. None crashes or stops the agent or later scrapes.
TEST_F(Metrics, GarbageClients) {
  auto o = options(/*progress_thread=*/true);
  o.metrics = "127.0.0.1:0";
  Agent a(o);
  const std::string m = a.metrics_address();
  // Idle connections held open through everything below.
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(dial(m));
  // Binary garbage: the server answers 400 or closes; either way it ends the connection.
  {
    const int fd = dial(m);
    std::string junk;
    for (int i = 0; i < 3000; ++i) junk += static_cast<char>((i * 73 + 11) & 0xff);
    junk += "\r\n\r\n";
    try {
      send_all(fd, junk);
    } catch (const std::exception&) {  // reset by the server mid-send
    }
    const std::string r = read_all(fd);
    EXPECT_TRUE(r.empty() || r.rfind("HTTP/1.", 0) == 0) << r.substr(0, 80);
    ::close(fd);
  }
  // Text that is not HTTP.
  {
    const int fd = dial(m);
    send_all(fd, "HELLO THERE\r\n\r\n");
    const std::string r = read_all(fd);
    EXPECT_TRUE(r.empty() || (r.rfind("HTTP/1.", 0) == 0 && r.find(" 200 ") == std::string::npos)) << r.substr(0, 80);
    ::close(fd);
  }
  // Half a request, then the client goes away.
  {
    const int fd = dial(m);
    send_all(fd, "GET /metr");
    ::close(fd);
  }
  // A request line of 1 MiB.
  {
    const int fd = dial(m);
    try {
      send_all(fd, "GET /" + std::string(1 << 20, 'a') + " HTTP/1.1\r\n\r\n");
    } catch (const std::exception&) {
    }
    const std::string r = read_all(fd);
    EXPECT_TRUE(r.empty() || r.find(" 414 ") != std::string::npos || r.find(" 400 ") != std::string::npos)
        << r.substr(0, 80);
    ::close(fd);
  }
  // A full request, then close without reading the answer.
  for (int i = 0; i < 8; ++i) {
    const int fd = dial(m);
    send_all(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    ::close(fd);
  }
  // A body on GET, and a POST with one.
  {
    const int fd = dial(m);
    send_all(fd, "POST /metrics HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello");
    const std::string r = read_all(fd);
    EXPECT_NE(r.find(" 405 "), std::string::npos) << r.substr(0, 80);
    ::close(fd);
  }
  // Still serving, while the idle ones are open, and the agent still works.
  std::vector<uint8_t> mem(4096);
  Region r = a.register_memory(mem.data(), mem.size());
  const auto ss = scrape(m);
  EXPECT_EQ(value(ss, "rwin_agent_regions"), 1);
  EXPECT_EQ(value(ss, "rwin_agent_refused_total"), 0);  // the control listener saw none of this
  for (int fd : idle) ::close(fd);
  r.deregister();
  EXPECT_EQ(value(scrape(m), "rwin_agent_regions"), 0);
}

// Scrapes from another thread while calls run (the counters are read without the agent's lock: TSan
// runs this): every scrape's put count lies between the last one and the final count, which is exact.
TEST_F(Metrics, ScrapesDuringCalls) {
  std::vector<uint8_t> mem(1 << 16);
  Agent owner(options(/*progress_thread=*/true));
  Region r = owner.register_memory(mem.data(), mem.size());
  auto o = options();
  o.metrics = "127.0.0.1:0";
  Agent a(o);
  const std::string m = a.metrics_address();
  RemoteRegion d = a.import_region(r.descriptor());
  constexpr int kPuts = 300;
  std::atomic<bool> done{false};
  std::atomic<int> scrapes{0};
  std::string failure;
  std::thread scraper([&] {
    try {
      double last = 0;
      while (!done.load()) {
        const double n = value(scrape(m), "rwin_agent_operations_total", {{"op", "put"}});
        REQUIRE(n >= last && n <= kPuts);
        last = n;
        scrapes.fetch_add(1);
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  std::vector<uint8_t> buf(256, 1);
  for (int i = 0; i < kPuts; ++i) {
    a.put(d, static_cast<uint64_t>(i) * 128, buf.data(), buf.size());
    if (i % 50 == 0) a.flush();
  }
  a.flush();
  // At least one scrape overlapped the calls or follows them (not a timing check: waited for).
  while (scrapes.load() < 2 && failure.empty()) std::this_thread::sleep_for(1ms);
  done = true;
  scraper.join();
  EXPECT_EQ(failure, "");
  const auto ss = scrape(m);
  EXPECT_EQ(value(ss, "rwin_agent_operations_total", {{"op", "put"}}), kPuts);
  EXPECT_EQ(value(ss, "rwin_agent_bytes_total", {{"op", "put"}}), kPuts * 256.0);
  EXPECT_EQ(value(ss, "rwin_agent_peer_operations_total", {{"peer", owner.address()}, {"op", "put"}}), kPuts);
  EXPECT_EQ(value(ss, "rwin_agent_operations_total", {{"op", "flush"}}), kPuts / 50 + 1);
}

// Two agents in one process need two ports; close() stops the server (the port is free again).
TEST_F(Metrics, CloseStopsTheServer) {
  std::string m;
  {
    auto o = options();
    o.metrics = "127.0.0.1:0";
    Agent a(o);
    m = a.metrics_address();
    EXPECT_EQ(value(scrape(m), "rwin_agent_regions"), 0);
  }
  EXPECT_THROW(dial(m), std::runtime_error);  // refused: nothing listens
  auto o = options();
  o.metrics = m;  // the same port again
  Agent b(o);
  EXPECT_EQ(b.metrics_address(), m);
}

}  // namespace

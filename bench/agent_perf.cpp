// rwin-agent-perf: what the agent (rwin/agent.h) costs between two processes on one host:
// first-use connection set-up (import_region of a peer not met before), put and get bandwidth,
// and 4 KiB latencies (get round trip; put_notify answered by the server's put_notify back).
//
//   rwin-agent-perf                       # forks its server: one run, one table (or --json)
//   rwin-agent-perf server --desc F       # a server alone: writes its descriptors to F
//   rwin-agent-perf client --desc F       # ... and a client of it (another process or host)
//
// The server answers ping-pongs and then progresses (spinning, unless --progress-thread: then it
// sleeps and its progress thread serves, as a passive server would). --transport tcp runs over
// rwin's own sockets; with ucx, UCX_TLS picks tcp or shared memory. bench/RESULTS.md holds measured numbers; nothing here asserts any.
// --pin (forked): the client on the first CPU it may use, the whole server on the second (default:
// where the scheduler puts them), to tell the transport's costs from the scheduler's placement
// (bench/RESULTS.md, "The agent's passive get: where the scheduler put the client").
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "pin_cpu.h"
#include "rwin/agent.h"
#include "rwin/rwin.h"
#include "tools/cli.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Config {
  std::string listen = "127.0.0.1:0";
  std::string desc;
  uint64_t max_bytes = 64 << 20;
  int iters = 200;
  int bw_iters = 0;  // 0: by size
  bool progress_thread = false;
  bool json = false;
  std::string transport = "ucx";
  bool announce = false;  // the server subcommand prints its agent (address, transport port) on stdout
  bool pin = false;
};

// Signal words: [0] client -> server ping, [1] stop; the client's own [0] is the pong.
void write_file(const std::string& path, const std::vector<uint8_t>& b) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  std::filesystem::rename(tmp, path);
}

std::vector<uint8_t> read_file(const std::string& path, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (!std::filesystem::exists(path)) {
    if (Clock::now() > end) throw std::runtime_error("no descriptor file " + path);
    std::this_thread::sleep_for(1ms);
  }
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The descriptor file: u32 length + bytes, for data, signals; the client appends its signal's.
std::vector<uint8_t> pack(const std::vector<std::vector<uint8_t>>& parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) {
    const uint32_t n = static_cast<uint32_t>(p.size());
    out.insert(out.end(), reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 4);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}
std::vector<std::vector<uint8_t>> unpack(const std::vector<uint8_t>& b) {
  std::vector<std::vector<uint8_t>> parts;
  size_t at = 0;
  while (at + 4 <= b.size()) {
    uint32_t n = 0;
    std::memcpy(&n, b.data() + at, 4);
    at += 4;
    if (n > b.size() - at) throw std::runtime_error("bad descriptor file");
    parts.emplace_back(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
    at += n;
  }
  return parts;
}

int server(const Config& c) {
  rwin::AgentOptions o;
  o.listen = c.listen;
  o.progress_thread = c.progress_thread;
  o.transport = c.transport;
  rwin::Agent a(o);
  if (c.announce) {  // e.g. "# agent 127.0.0.1:40123 tcp(127.0.0.1:40125)": the fault suite's strangers aim at it
    std::printf("# %s\n", a.describe().c_str());
    std::fflush(stdout);
  }
  std::vector<uint8_t> data(c.max_bytes, 1);
  alignas(64) int64_t sig[8] = {};
  rwin::Region rd = a.register_memory(data.data(), data.size());
  rwin::Region rs = a.register_memory(sig, sizeof sig);
  write_file(c.desc, pack({rd.descriptor(), rs.descriptor()}));
  // The client's signal region arrives as a second file: the pong target.
  // Progress meanwhile: the client connects (its first-use set-up is measured) before it writes it.
  const auto end = Clock::now() + 120s;
  while (!std::filesystem::exists(c.desc + ".client")) {
    if (Clock::now() > end) throw std::runtime_error("no client within 120 s");
    a.progress();
  }
  const auto cparts = unpack(read_file(c.desc + ".client", 120s));
  rwin::RemoteRegion csig = a.import_region(cparts.at(0));
  for (int64_t i = 1;; ++i) {
    // Ping-pong: wait for the client's i-th put_notify, answer with one back.
    while (!a.test(rs, 0, i) && !a.test(rs, 8, 1)) {
    }
    if (a.test(rs, 8, 1)) break;
    a.put_notify(csig, 64, data.data(), 4096, csig, 0, 1);
  }
  if (c.progress_thread) {
    while (!a.test(rs, 8, 2)) std::this_thread::sleep_for(1ms);
  } else {
    while (!a.test(rs, 8, 2)) {
    }
  }
  return 0;
}

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

int client(const Config& c) {
  rwin::AgentOptions o;
  o.transport = c.transport;
  rwin::Agent a(o);
  const auto parts = unpack(read_file(c.desc, 120s));
  alignas(64) std::vector<int64_t> sigmem(8 + 4096 / 8, 0);
  rwin::Region mine = a.register_memory(sigmem.data(), sigmem.size() * 8);
  const auto t0 = Clock::now();
  rwin::RemoteRegion d = a.import_region(parts.at(0));
  const double connect_us = us_since(t0);
  const auto t1 = Clock::now();
  rwin::RemoteRegion s = a.import_region(parts.at(1));
  const double import_us = us_since(t1);
  write_file(c.desc + ".client", pack({mine.descriptor()}));
  nlohmann::json out;
  out["tool"] = "rwin-agent-perf";
  out["agent"] = a.describe();
  out["connect_us"] = connect_us;
  out["import_connected_us"] = import_us;
  std::vector<uint8_t> buf(c.max_bytes, 3);
  // 4 KiB latencies.
  auto time_gets = [&] {
    std::vector<double> v;
    for (int i = 0; i < c.iters; ++i) {
      const auto t = Clock::now();
      a.get(buf.data(), d, 0, 4096);
      v.push_back(us_since(t));
    }
    return v;
  };
  const std::vector<double> get_lat = time_gets();
  std::vector<double> pp_lat;
  for (int i = 0; i < c.iters; ++i) {
    const auto t = Clock::now();
    a.put_notify(d, 0, buf.data(), 4096, s, 0, 1);
    a.wait(mine, 0, i + 1, rwin::WaitCmp::GE, 30000ms);
    pp_lat.push_back(us_since(t) / 2);
  }
  a.notify(s, 8, 1, rwin::NotifyOp::Set);  // the server stops answering ping-pongs
  // The gets above found the server's main thread polling (its ping-pong loop calls test()); from here
  // on it sleeps (--progress-thread: a 1 ms sleep loop) and the transport serves it passively.
  std::this_thread::sleep_for(20ms);
  const std::vector<double> get_passive = time_gets();
  auto quantile = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  auto p50 = [&](const std::vector<double>& v) { return quantile(v, 0.5); };
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  out["get_4k_p50_us"] = p50(get_lat);
  out["get_4k_avg_us"] = mean(get_lat);
  out["put_notify_4k_one_way_p50_us"] = p50(pp_lat);
  out["get_4k_passive_p50_us"] = p50(get_passive);
  out["get_4k_passive_avg_us"] = mean(get_passive);
  out["get_4k_passive_p99_us"] = quantile(get_passive, 0.99);
  out["get_4k_p99_us"] = quantile(get_lat, 0.99);
  // Bandwidth: back-to-back blocking puts then one flush; gets.
  nlohmann::json rows = nlohmann::json::array();
  for (uint64_t n = 4096; n <= c.max_bytes; n *= 4) {
    const int it = c.bw_iters > 0 ? c.bw_iters : static_cast<int>(std::clamp<uint64_t>((256ull << 20) / n, 4, 2000));
    a.put(d, 0, buf.data(), n);
    a.flush();
    auto t = Clock::now();
    for (int i = 0; i < it; ++i) a.put(d, 0, buf.data(), n);
    a.flush();
    const double put_s = us_since(t) / 1e6;
    t = Clock::now();
    for (int i = 0; i < it; ++i) a.get(buf.data(), d, 0, n);
    const double get_s = us_since(t) / 1e6;
    const double mib = static_cast<double>(n) * it / (1 << 20);
    rows.push_back({{"bytes", n}, {"iters", it}, {"put_MiBps", mib / put_s}, {"get_MiBps", mib / get_s}});
  }
  out["bandwidth"] = rows;
  a.notify(s, 8, 2, rwin::NotifyOp::Set);  // a swap: complete when it returns (the server then exits)
  if (c.json) {
    std::printf("%s\n", out.dump(1).c_str());
  } else {
    std::printf("# %s\n", a.describe().c_str());
    std::printf("first-use connect + import: %.0f us; import on a connected peer: %.0f us\n", connect_us, import_us);
    std::printf("4 KiB get p50: %.1f us (avg %.1f, p99 %.1f) from a server polling, %.1f us (avg %.1f, p99 %.1f) from a "
                "passive one; 4 KiB put_notify one way (ping-pong/2) p50: %.1f us\n", p50(get_lat), mean(get_lat),
                quantile(get_lat, 0.99), p50(get_passive), mean(get_passive), quantile(get_passive, 0.99), p50(pp_lat));
    std::printf("%12s %8s %12s %12s\n", "bytes", "iters", "put MiB/s", "get MiB/s");
    for (const auto& r : rows) {
      std::printf("%12llu %8d %12.0f %12.0f\n", static_cast<unsigned long long>(r["bytes"].get<uint64_t>()),
                  r["iters"].get<int>(), r["put_MiBps"].get<double>(), r["get_MiBps"].get<double>());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rwin agent: first-use connection time, put/get bandwidth and 4 KiB latency between two processes",
               "rwin-agent-perf"};
  rwin::cli::setup(app, rwin::version());
  Config c;
  app.add_option("--max-bytes", c.max_bytes, "largest transfer (bandwidth sizes 4 KiB x4 up to it)")
      ->transform(rwin::cli::Size(4096, 1ull << 32))
      ->type_name("SIZE");
  app.add_option("--iters", c.iters, "latency iterations")->check(CLI::Range(1, 1000000));
  app.add_option("--bw-iters", c.bw_iters, "bandwidth iterations per size (0: 256 MiB worth)")->check(CLI::Range(0, 1000000));
  app.add_flag("--progress-thread", c.progress_thread, "the server serves from its progress thread (sleeps otherwise)");
  app.add_flag("--json", c.json, "one JSON object instead of the table");
  app.add_flag("--pin", c.pin, "forked: the client on the first CPU it may use, the server on the second (default: where the scheduler puts them)");
  app.add_option("--transport", c.transport, "ucx (UCX_TLS picks tcp or shared memory), tcp (rwin's own) or verbs")
      ->check(CLI::IsMember({"ucx", "tcp", "verbs"}));
  auto* srv = app.add_subcommand("server", "run the server side only");
  srv->add_option("--listen", c.listen, "control address host:port (port 0: ephemeral)");
  srv->add_option("--desc", c.desc, "file to write the descriptors to")->required();
  auto* cli = app.add_subcommand("client", "run the client side only");
  cli->add_option("--desc", c.desc, "the server's descriptor file")->required();
  rwin::cli::parse_or_exit(app, argc, argv);
  try {
    if (srv->parsed()) {
      c.announce = true;
      return server(c);
    }
    if (cli->parsed()) return client(c);
    char dir[] = "/tmp/rwin-agent-perf-XXXXXX";
    if (!mkdtemp(dir)) throw std::runtime_error("mkdtemp failed");
    c.desc = std::string(dir) + "/desc";
    std::fflush(nullptr);
    const pid_t p = fork();
    if (p == 0) {
      if (c.pin && rwin_bench::allowed_cpus().size() >= 2) rwin_bench::pin_to_allowed(1, "rwin-agent-perf");
      int rc = 1;
      try {
        rc = server(c);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rwin-agent-perf server: %s\n", e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    if (c.pin && rwin_bench::allowed_cpus().size() >= 2) rwin_bench::pin_to_allowed(0, "rwin-agent-perf");
    int rc = client(c);
    int st = 0;
    waitpid(p, &st, 0);
    std::filesystem::remove_all(dir);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rwin-agent-perf: %s\n", e.what());
    return 1;
  }
}

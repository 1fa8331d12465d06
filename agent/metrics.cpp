// The agent's metrics (metrics.h): the Prometheus text exposition format 0.0.4, served over HTTP by
// libmicrohttpd or written to a file.
//
// Why libmicrohttpd: a maintained, small C library packaged by Debian (libmicrohttpd-dev) that runs
// its own polling thread, so a scrape is answered while the agent's threads are busy or asleep and
// never takes their lock; HTTP parsing (keep-alive, partial requests, slow clients, limits) stays out
// of rwin. The file form needs nothing but rename(2) (node_exporter's textfile collector reads it).
#include "agent/metrics.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "agent/agent_impl.h"  // listen_on
#include "bootstrap/bootstrap.h"  // HostPort
#include "common/log.h"
#include "rwin/rwin.h"

#include <microhttpd.h>

namespace rwin {

const char* agent_op_name(AgentOp op) noexcept {
  switch (op) {
    case AgentOp::Put: return "put";
    case AgentOp::Get: return "get";
    case AgentOp::PutNotify: return "put_notify";
    case AgentOp::Notify: return "notify";
    case AgentOp::Flush: return "flush";
    case AgentOp::Wait: return "wait";
    case AgentOp::Test: return "test";
    case AgentOp::Import: return "import";
    case AgentOp::Register: return "register";
    case AgentOp::Deregister: return "deregister";
  }
  return "?";
}

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Label values: backslash, double quote and line feed escaped (the format's rule).
void escape_into(std::string& out, const std::string& v) {
  for (char ch : v) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
}

class Text {
 public:
  explicit Text(const Labels& labels) {
    for (const auto& [k, v] : labels) {
      if (!common_.empty()) common_ += ',';
      common_ += k + "=\"";
      escape_into(common_, v);
      common_ += '"';
    }
  }
  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  // A family of one unlabelled sample (the name written once).
  template <class N>
  void single(const char* name, const char* type, const char* help, N n) {
    family(name, type, help);
    sample(name, n);
  }
  // One sample; `key`/`value` one more label when key is not null.
  template <class N>
  void sample(const char* name, N n, const char* key = nullptr, const std::string& value = {},
              const char* key2 = nullptr, const std::string& value2 = {}) {
    out_ += name;
    out_ += '{';
    out_ += common_;
    bool first = common_.empty();
    for (auto [k, v] : {std::pair{key, &value}, std::pair{key2, &value2}}) {
      if (!k) continue;
      if (!first) out_ += ',';
      first = false;
      out_ += k;
      out_ += "=\"";
      escape_into(out_, *v);
      out_ += '"';
    }
    out_ += "} ";
    out_ += std::to_string(n);
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  std::string common_;
  std::string out_;
};

constexpr AgentOp kCalls[] = {AgentOp::Put,  AgentOp::Get,  AgentOp::PutNotify, AgentOp::Notify,
                              AgentOp::Flush, AgentOp::Wait, AgentOp::Test};
constexpr AgentOp kData[] = {AgentOp::Put, AgentOp::Get, AgentOp::PutNotify};
constexpr const char* kDirection[] = {"outbound", "inbound"};

}  // namespace

std::string render_metrics(const AgentCounters& c, const Labels& labels, const std::string& transport) {
  using C = AgentCounters;
  Text t(labels);
  const auto at = [](AgentOp o) { return static_cast<size_t>(o); };
  t.family("rwin_agent_info", "gauge", "Always 1: the agent's labels and its transport.");
  t.sample("rwin_agent_info", 1, "transport", transport);
  t.family("rwin_agent_operations_total", "counter",
           "Calls of this agent that returned, by operation: as initiator (put, get, put_notify, notify, flush) "
           "or on its own signal words (wait, test).");
  for (AgentOp o : kCalls) t.sample("rwin_agent_operations_total", C::get(c.ops[at(o)]), "op", agent_op_name(o));
  t.family("rwin_agent_bytes_total", "counter", "Data bytes of the put, get and put_notify calls that returned.");
  for (AgentOp o : kData) t.sample("rwin_agent_bytes_total", C::get(c.bytes[at(o)]), "op", agent_op_name(o));
  const auto by_peer = c.peers_copy();
  t.family("rwin_agent_peer_operations_total", "counter",
           "Calls of this agent to one peer agent that returned, by peer (the owner's control address, or "
           "\"other\" past 256 peers) and operation (put, get, put_notify, notify).");
  for (const auto& [peer, pc] : by_peer) {
    for (size_t i = 0; i < AgentCounters::kPeerOps; ++i) {
      t.sample("rwin_agent_peer_operations_total", pc.ops[i], "peer", peer, "op", agent_op_name(static_cast<AgentOp>(i)));
    }
  }
  t.family("rwin_agent_peer_bytes_total", "counter",
           "Data bytes of the put, get and put_notify calls of this agent to one peer agent that returned, by peer and "
           "operation.");
  for (const auto& [peer, pc] : by_peer) {
    for (AgentOp o : kData) {
      t.sample("rwin_agent_peer_bytes_total", pc.bytes[at(o)], "peer", peer, "op", agent_op_name(o));
    }
  }
  t.family("rwin_agent_errors_total", "counter",
           "Calls of this agent that threw an error (a bad argument, a failed peer, a timeout), by operation.");
  for (size_t i = 0; i < kAgentOps; ++i) {
    t.sample("rwin_agent_errors_total", C::get(c.errors[i]), "op", agent_op_name(static_cast<AgentOp>(i)));
  }
  t.single("rwin_agent_regions_registered_total", "counter", "Regions registered (register_memory that returned).",
           C::get(c.ops[at(AgentOp::Register)]));
  t.single("rwin_agent_regions_deregistered_total", "counter", "Regions deregistered (revoked at their importers).",
           C::get(c.ops[at(AgentOp::Deregister)]));
  t.single("rwin_agent_regions", "gauge", "Regions registered now.",
           std::max<int64_t>(0, c.regions.load(std::memory_order_relaxed)));
  t.single("rwin_agent_imports_total", "counter", "Descriptors imported (import_region that returned).",
           C::get(c.ops[at(AgentOp::Import)]));
  t.family("rwin_agent_peers_connected_total", "counter",
           "Control connections with another agent whose handshake completed, by direction (outbound: this "
           "agent imported from that one; inbound: that one imported from this one).");
  for (size_t d = 0; d < 2; ++d) t.sample("rwin_agent_peers_connected_total", C::get(c.connected[d]), "direction", kDirection[d]);
  t.family("rwin_agent_peers", "gauge", "Control connections with another agent established now, by direction.");
  for (size_t d = 0; d < 2; ++d) {
    t.sample("rwin_agent_peers", std::max<int64_t>(0, c.peers[d].load(std::memory_order_relaxed)), "direction",
             kDirection[d]);
  }
  t.family("rwin_agent_peer_failures_total", "counter",
           "Connections with another agent that failed (a transport error, silence past keepalive_timeout, "
           "end of file, a refusal, fail_peer), by direction.");
  for (size_t d = 0; d < 2; ++d) t.sample("rwin_agent_peer_failures_total", C::get(c.failures[d]), "direction", kDirection[d]);
  t.family("rwin_agent_peer_closes_total", "counter",
           "Connections ended in order because the other agent closed (its bye), by direction.");
  for (size_t d = 0; d < 2; ++d) t.sample("rwin_agent_peer_closes_total", C::get(c.closes[d]), "direction", kDirection[d]);
  t.single("rwin_agent_refused_total", "counter",
           "Connections to the control listener refused before a handshake completed: strangers, garbage, a "
           "wrong token, a handshake past connect_timeout, too many handshakes at once.",
           C::get(c.refused));
  t.single("rwin_agent_progress_rounds_total", "counter", "Progress rounds of the agent's progress thread.",
           C::get(c.rounds));
  t.single("rwin_agent_progress_sleeps_total", "counter",
           "Sleeps of the progress thread on its descriptors, woken by traffic, a deadline or a call.",
           C::get(c.sleeps));
  t.single("rwin_agent_progress_timer_sleeps_total", "counter",
           "Sleeps of the progress thread on its timer schedule (a transport that cannot wake it).",
           C::get(c.timer_sleeps));
  t.single("rwin_agent_reg_cache_hits_total", "counter",
           "Local memory of put and get found registered in the registration cache (verbs; 0 over UCX).",
           C::get(c.reg_cache_hits));
  t.single("rwin_agent_reg_cache_misses_total", "counter",
           "Local memory of put and get registered by the registration cache (verbs; 0 over UCX).",
           C::get(c.reg_cache_misses));
  return t.take();
}

std::string check_metric_labels(const Labels& labels) {
  std::vector<std::string> seen{"agent", "op", "direction", "transport", "peer"};  // the metrics' own
  for (const auto& [k, v] : labels) {
    bool ok = !k.empty() && !(k[0] >= '0' && k[0] <= '9') && k.rfind("__", 0) != 0;
    for (char ch : k) ok = ok && (ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'));
    if (!ok) return "label name '" + k + "' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)";
    for (const auto& s : seen) {
      if (s == k) return "label '" + k + "' is given twice or is one the metrics set themselves (agent, op, direction, transport, peer)";
    }
    seen.push_back(k);
  }
  return {};
}

namespace {

constexpr const char* kForms =
    "expected [http://]HOST:PORT or :PORT (HTTP GET /metrics; :PORT = 127.0.0.1:PORT; port 0 = ephemeral), "
    "file:PATH, or off";
constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

[[noreturn]] void bad(const std::string& source, const std::string& spec, const std::string& why,
                      ErrorCode code = ErrorCode::InvalidArgument) {
  throw Error(code, "agent: " + source + "='" + spec + "': " + why);
}

// %h -> host, %p -> pid, %% -> % (as RWIN_LOG_FILE): one file per process of a service.
std::string expand(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[i + 1];
      if (c == 'h') {
        char host[256] = {};
        if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
        out += host;
        ++i;
        continue;
      }
      if (c == 'p') {
        out += std::to_string(getpid());
        ++i;
        continue;
      }
      if (c == '%') {
        out += '%';
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

// "file:PATH": a writer thread rewrites PATH every interval (write a temporary file beside it, then
// rename over it, so a reader sees the old text or the new, never half of one), and stop() once more.
class FileExporter final : public MetricsExporter {
 public:
  FileExporter(std::string path, std::chrono::milliseconds interval, std::function<std::string()> render,
               std::string describe)
      : path_(std::move(path)), interval_(interval), render_(std::move(render)), describe_(std::move(describe)) {
    static std::atomic<uint64_t> serial{0};
    tmp_ = path_ + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial.fetch_add(1));
  }
  ~FileExporter() override { stop(); }

  // The first write happens here, in the caller's thread: a path that cannot be written fails start-up
  // (and the exporter is dropped without another try).
  std::string first_write() {
    std::string err = write_once();
    if (!err.empty()) stopped_ = true;
    return err;
  }
  void run() {
    thread_ = std::thread([this] {
      std::unique_lock lk(mu_);
      while (!cv_.wait_for(lk, interval_, [this] { return stopping_; })) {
        lk.unlock();
        report(write_once());
        lk.lock();
      }
    });
  }
  std::string address() const override { return "file:" + path_; }
  void stop() noexcept override {
    {
      std::lock_guard lk(mu_);
      if (stopped_) return;
      stopping_ = stopped_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    try {
      report(write_once());
    } catch (...) {
    }
  }

 private:
  std::string write_once() noexcept {
    try {
      const std::string text = render_();
      const int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return "cannot create " + tmp_ + ": " + std::strerror(errno);
      size_t done = 0;
      while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          const std::string e = "cannot write " + tmp_ + ": " + std::strerror(errno);
          ::close(fd);
          ::unlink(tmp_.c_str());
          return e;
        }
        done += static_cast<size_t>(n);
      }
      if (::close(fd) != 0) {
        const std::string e = "cannot write " + tmp_ + ": " + std::strerror(errno);
        ::unlink(tmp_.c_str());
        return e;
      }
      if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
        const std::string e = "cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(errno);
        ::unlink(tmp_.c_str());
        return e;
      }
      return {};
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  // A failing write is logged once, and its recovery once: not every interval.
  void report(const std::string& err) noexcept {
    if (err.empty()) {
      if (failing_) RWIN_LOG(Info, Core, "rwin: %s: metrics file %s written again", describe_.c_str(), path_.c_str());
      failing_ = false;
    } else if (!failing_) {
      failing_ = true;
      RWIN_LOG(Warn, Core, "rwin: %s: metrics: %s (retried every %lld ms)", describe_.c_str(), err.c_str(),
               static_cast<long long>(interval_.count()));
    }
  }

  std::string path_, tmp_;
  std::chrono::milliseconds interval_;
  std::function<std::string()> render_;
  std::string describe_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false, stopped_ = false;
  bool failing_ = false;  // the writer's (then stop()'s, after the join)
  std::thread thread_;
};

// "host:port": libmicrohttpd's own polling thread answers GET (and HEAD) /metrics; the handler only
// renders the atomics. A listener of our own (bound like the agent's control listener) is handed
// to it, so the bound port is known and the address resolution matches the agent's.
class HttpExporter final : public MetricsExporter {
 public:
  HttpExporter(std::function<std::string()> render, std::string describe)
      : render_(std::move(render)), describe_(std::move(describe)) {}
  ~HttpExporter() override { stop(); }

  void start(const std::string& spec, const std::string& source) {
    bootstrap::detail::Fd fd = listen_on(spec, "HTTP server", address_);
    const unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    d_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &HttpExporter::handle, this,
                          MHD_OPTION_EXTERNAL_LOGGER, &HttpExporter::log, this,  //
                          MHD_OPTION_LISTEN_SOCKET, fd.get(),                    //
                          MHD_OPTION_CONNECTION_LIMIT, 32u,                       // scrapers, not clients
                          MHD_OPTION_CONNECTION_TIMEOUT, 10u,                     // s: an idle or stuck client
                          MHD_OPTION_END);
    if (!d_) bad(source, spec, "libmicrohttpd could not start its server on " + address_, ErrorCode::Transport);
    (void)fd.release();  // the daemon's now: MHD_stop_daemon closes it
  }
  std::string address() const override { return address_; }
  void stop() noexcept override {
    if (d_) MHD_stop_daemon(d_);  // closes every connection and joins its thread
    d_ = nullptr;
  }

 private:
  static MHD_Result reply(MHD_Connection* conn, unsigned status, const std::string& body, const char* type) {
    MHD_Response* r =
        MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    const MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
  }
  static MHD_Result handle(void* cls, MHD_Connection* conn, const char* url, const char* method, const char*,
                           const char*, size_t* upload_size, void**) {
    auto* self = static_cast<HttpExporter*>(cls);
    if (*upload_size != 0) {  // a body (not of a GET): read and dropped, then answered below
      *upload_size = 0;
      return MHD_YES;
    }
    try {
      const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0 || std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
      if (!get) return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "rwin agent metrics: GET /metrics\n", "text/plain");
      if (std::strcmp(url, "/metrics") != 0) {
        return reply(conn, MHD_HTTP_NOT_FOUND, "rwin agent metrics: GET /metrics\n", "text/plain");
      }
      return reply(conn, MHD_HTTP_OK, self->render_(), kContentType);
    } catch (...) {  // out of memory: never into libmicrohttpd's C frames
      return MHD_NO;
    }
  }
  static void log(void* cls, const char* fmt, va_list ap) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    const size_t n = std::strlen(buf);
    if (n && buf[n - 1] == '\n') buf[n - 1] = 0;
    // A stranger's malformed request is logged here too ("Error processing request ... 400"): info, so
    // a port scanner does not fill a service's log (start-up failures throw instead).
    RWIN_LOG(Info, Core, "rwin: %s: metrics server: %s", static_cast<HttpExporter*>(cls)->describe_.c_str(), buf);
  }

  std::function<std::string()> render_;
  std::string describe_;
  std::string address_;
  MHD_Daemon* d_ = nullptr;
};

}  // namespace

MetricsSpec MetricsExporter::parse(const std::string& spec, const std::string& source) {
  MetricsSpec m;
  if (spec.empty() || spec == "off") return m;
  if (spec.rfind("file:", 0) == 0) {
    m.file = true;
    m.target = expand(spec.substr(5));
    if (m.target.empty()) bad(source, spec, std::string("no path after 'file:'; ") + kForms);
    return m;
  }
  // [http://]HOST:PORT, or :PORT for 127.0.0.1:PORT; nothing after the port (the path is /metrics).
  std::string addr = spec;
  if (addr.rfind("http://", 0) == 0) addr = addr.substr(7);
  if (addr.find("://") != std::string::npos || addr.find('/') != std::string::npos) {
    bad(source, spec, std::string("not an address (only the http:// scheme; no path, it is always /metrics); ") + kForms);
  }
  if (addr.find(':') == std::string::npos) bad(source, spec, std::string("no ':port'; ") + kForms);
  if (addr[0] == ':') addr = "127.0.0.1" + addr;
  try {
    (void)bootstrap::HostPort::parse(addr);
  } catch (const std::exception& e) {
    bad(source, spec, std::string(e.what()) + "; " + kForms);
  }
  m.http = true;
  m.target = addr;
  return m;
}

std::unique_ptr<MetricsExporter> MetricsExporter::start(const std::string& spec, const std::string& source,
                                                        std::chrono::milliseconds interval,
                                                        std::function<std::string()> render,
                                                        const std::string& describe) {
  const MetricsSpec m = parse(spec, source);
  if (m.file) {
    auto f = std::make_unique<FileExporter>(m.target, interval, std::move(render), describe);
    if (const std::string err = f->first_write(); !err.empty()) bad(source, spec, err, ErrorCode::Transport);
    f->run();
    return f;
  }
  if (!m.http) return nullptr;
  auto h = std::make_unique<HttpExporter>(std::move(render), describe);
  try {
    h->start(m.target, source);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidArgument) throw;
    // listen_on: cannot resolve or bind (in use, not an address of this host).
    throw Error(ErrorCode::InvalidArgument, "agent: " + source + "='" + spec + "': " + e.what());
  }
  return h;
}

}  // namespace rwin

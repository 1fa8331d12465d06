// rwinrun: start N ranks of a program on this machine, wired for rwin's bootstrap.
//
//   rwinrun -n N [--timeout S] [--root host:port] [--] PROGRAM ARGS...
//
// Each rank gets RWIN_RANK, RWIN_NRANKS, RWIN_ROOT and RWIN_JOB_KEY (a fresh random key per job
// unless RWIN_JOB_KEY is already set) on top of the inherited environment, runs
// in its own process group (so signals reach whatever it spawned), and has its stdout/stderr
// lines prefixed with "[rank] ". The first rank to fail (non-zero exit or signal) or the deadline
// ends the job: the others get SIGTERM, then SIGKILL after a grace period.
// Exit status: 0 all ranks succeeded, 1 a rank failed, 124 timeout, 128+sig if rwinrun was
// interrupted by SIGINT/SIGTERM, 2 bad usage, 127 could not start.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/parse_number.h"
#include "common/knobs.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kKillGrace = 3s;        // SIGTERM -> SIGKILL
constexpr auto kDrainAfterExit = 2s;   // output still held by a rank's leftover children
constexpr size_t kMaxLine = 64 << 10;  // longer lines are split so memory stays bounded

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_pipe[1], &b, 1);  // async-signal-safe; a full pipe already has a wake-up
  errno = saved;
}

void usage(FILE* f) {
  std::fprintf(f,
               "usage: rwinrun -n N [--timeout SECONDS] [--root HOST:PORT] [--] PROGRAM [ARGS...]\n"
               "  -n N               number of ranks to start on this machine (1..4096)\n"
               "  --timeout SECONDS  end the job after this long (default 600); exit status 124\n"
               "  --root HOST:PORT   rendezvous address given to the ranks as RWIN_ROOT\n"
               "                     (default: a free port on 127.0.0.1)\n"
               "Each rank gets RWIN_RANK, RWIN_NRANKS, RWIN_ROOT and RWIN_JOB_KEY (fresh per job unless\n"
               "already set); output lines are prefixed \"[rank] \".\n"
               "If a rank fails the others are terminated. Exit: 0 ok, 1 rank failed, 124 timeout, 2 usage.\n");
}

[[noreturn]] void bad_usage(const std::string& msg) {
  std::fprintf(stderr, "rwinrun: %s\n", msg.c_str());
  usage(stderr);
  std::exit(2);
}

std::string signal_text(int sig) {
  std::string s = std::to_string(sig);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* abbrev = sigabbrev_np(sig)) s += std::string(" (SIG") + abbrev + ")";
#endif
  return s;
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // our own stdout is gone (e.g. a closed pipe): keep running the job regardless
    }
    off += static_cast<size_t>(n);
  }
}

// Bind port 0 on loopback, read the port the kernel chose, release it. Another process could take
// it before rank 0 binds; rank 0's bind error would then say so.
uint16_t pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

struct Stream {
  int fd = -1;     // read end of the rank's pipe; -1 at EOF
  int out_fd = 1;  // where prefixed lines go
  std::string partial;
};

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream streams[2];
};

void emit_lines(Rank& r, Stream& s, bool flush_partial) {
  const std::string prefix = "[" + std::to_string(r.index) + "] ";
  std::string out;
  size_t start = 0;
  for (;;) {
    const size_t nl = s.partial.find('\n', start);
    if (nl == std::string::npos) break;
    out += prefix;
    out.append(s.partial, start, nl - start + 1);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (!s.partial.empty() && (flush_partial || s.partial.size() >= kMaxLine)) {
    out += prefix + s.partial + "\n";
    s.partial.clear();
  }
  if (!out.empty()) write_all(s.out_fd, out);
}

void read_stream(Rank& r, Stream& s) {
  char buf[65536];
  const ssize_t n = ::read(s.fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    ::close(s.fd);
    s.fd = -1;
    emit_lines(r, s, true);
    return;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  emit_lines(r, s, false);
}

void signal_all(std::vector<Rank>& ranks, int sig) {
  for (auto& r : ranks) {
    // The whole process group: a shell rank's `sleep` must go too. Exited leaders still count,
    // their group lives on while any member does.
    if (r.pid > 0) ::kill(-r.pid, sig);
  }
}

int run(int nranks, double timeout_s, const std::string& root, char** argv) {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::fprintf(stderr, "rwinrun: pipe failed: %s\n", std::strerror(errno));
    return 127;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGCHLD, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  // Orphans of a rank (its background children) are reparented to us rather than to init, so
  // the reaping loop below collects them instead of leaving zombies behind.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  // One secret per job, so nothing but this job's ranks can use its store (docs/CONTRACT.md,
  // security model). An RWIN_JOB_KEY already set is passed on unchanged (a job that spans
  // several rwinrun invocations, or a test that wants a known key).
  std::string job_key;
  if (const char* k = rwin::knobs::env("RWIN_JOB_KEY")) {
    job_key = k;
  } else {
    try {
      job_key = rwin::bootstrap::auth::new_job_key();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rwinrun: cannot create a job key: %s\n", e.what());
      return 127;
    }
  }

  std::vector<Rank> ranks(static_cast<size_t>(nranks));
  const std::string nranks_text = std::to_string(nranks);
  int failed_start = 0;
  for (int i = 0; i < nranks; ++i) {
    Rank& r = ranks[static_cast<size_t>(i)];
    r.index = i;
    int pipes[2][2];
    if (::pipe2(pipes[0], O_CLOEXEC) != 0 || ::pipe2(pipes[1], O_CLOEXEC) != 0) {
      std::fprintf(stderr, "rwinrun: pipe for rank %d failed: %s\n", i, std::strerror(errno));
      failed_start = 1;
      break;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "rwinrun: fork of rank %d failed: %s\n", i, std::strerror(errno));
      for (auto& p : pipes) ::close(p[0]), ::close(p[1]);
      failed_start = 1;
      break;
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(pipes[0][1], 1);
      ::dup2(pipes[1][1], 2);
      if (i != 0) {  // like mpirun: only rank 0 reads the terminal's stdin
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
      }
      // Undo what rwinrun set for itself; exec keeps ignored dispositions and the mask.
      ::signal(SIGPIPE, SIG_DFL);
      for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      ::setenv("RWIN_RANK", std::to_string(i).c_str(), 1);
      ::setenv("RWIN_NRANKS", nranks_text.c_str(), 1);
      ::setenv("RWIN_ROOT", root.c_str(), 1);
      ::setenv("RWIN_JOB_KEY", job_key.c_str(), 1);
      ::execvp(argv[0], argv);
      const int e = errno;
      std::fprintf(stderr, "rwinrun: cannot execute '%s': %s\n", argv[0], std::strerror(e));
      std::fflush(stderr);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here: whichever of parent/child runs first, the group exists
    ::close(pipes[0][1]);
    ::close(pipes[1][1]);
    r.pid = pid;
    r.running = true;
    r.streams[0] = {pipes[0][0], 1, {}};
    r.streams[1] = {pipes[1][0], 2, {}};
    for (auto& s : r.streams) ::fcntl(s.fd, F_SETFL, O_NONBLOCK);
  }

  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  int exit_code = failed_start;
  bool terminating = false;
  Clock::time_point kill_at{};
  bool killed = false;
  Clock::time_point all_exited_at{};
  bool all_exited = false;

  auto begin_termination = [&](int code) {
    if (terminating) return;
    terminating = true;
    exit_code = code;
    signal_all(ranks, SIGTERM);
    kill_at = Clock::now() + kKillGrace;
  };
  if (failed_start) begin_termination(1);

  for (;;) {
    // Reap everything that has exited.
    for (;;) {
      int st = 0;
      const pid_t pid = ::waitpid(-1, &st, WNOHANG);
      if (pid <= 0) break;
      for (auto& r : ranks) {
        if (r.pid != pid || !r.running) continue;
        r.running = false;
        r.status = st;
        const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (!ok && !terminating) {
          int others = 0;
          for (auto& o : ranks) others += o.running ? 1 : 0;
          const std::string how = WIFSIGNALED(st) ? "killed by signal " + signal_text(WTERMSIG(st))
                                                  : "exited with status " + std::to_string(WEXITSTATUS(st));
          std::string msg = "rwinrun: rank " + std::to_string(r.index) + " (pid " + std::to_string(pid) + ") " + how;
          if (others > 0) {
            msg += "; terminating the other " + std::to_string(others) + (others == 1 ? " rank" : " ranks");
          }
          write_all(2, msg + "\n");
          begin_termination(1);
        }
      }
    }
    bool any_running = false;
    for (auto& r : ranks) any_running |= r.running;
    if (!any_running && !all_exited) {
      all_exited = true;
      all_exited_at = Clock::now();
    }
    bool any_open = false;
    for (auto& r : ranks) {
      for (auto& s : r.streams) any_open |= s.fd >= 0;
    }
    const auto now = Clock::now();
    if (all_exited && (!any_open || now >= all_exited_at + kDrainAfterExit)) break;

    if (!terminating && now >= deadline) {
      int alive = 0;
      for (auto& r : ranks) alive += r.running ? 1 : 0;
      write_all(2, "rwinrun: timed out after " + std::to_string(static_cast<long long>(std::ceil(timeout_s))) +
                       " s; terminating " + std::to_string(alive) + (alive == 1 ? " rank" : " ranks") + "\n");
      begin_termination(124);
    }
    if (terminating && !killed && now >= kill_at) {
      killed = true;
      signal_all(ranks, SIGKILL);
    }

    // Sleep until output, a signal, or the next deadline of interest.
    auto next = now + 1s;
    if (!terminating) next = std::min(next, deadline);
    if (terminating && !killed) next = std::min(next, kill_at);
    if (all_exited) next = std::min(next, all_exited_at + kDrainAfterExit);
    std::vector<pollfd> fds;
    std::vector<std::pair<Rank*, Stream*>> owners;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    owners.push_back({nullptr, nullptr});
    for (auto& r : ranks) {
      for (auto& s : r.streams) {
        if (s.fd < 0) continue;
        fds.push_back({s.fd, POLLIN, 0});
        owners.push_back({&r, &s});
      }
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
    const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(0, wait_ms)));
    if (rc < 0 && errno != EINTR) {
      std::fprintf(stderr, "rwinrun: poll failed: %s\n", std::strerror(errno));
      begin_termination(1);
      continue;
    }
    if (rc <= 0) continue;
    if (fds[0].revents) {
      unsigned char sigs[64];
      const ssize_t n = ::read(g_signal_pipe[0], sigs, sizeof sigs);
      for (ssize_t i = 0; i < n; ++i) {
        const int sig = sigs[i];
        if (sig == SIGCHLD) continue;  // reaped at the top of the loop
        // Forward: the ranks are in their own process groups, so a terminal's ^C never reaches them.
        if (!terminating) {
          write_all(2, "rwinrun: received signal " + signal_text(sig) + "; forwarding to " + std::to_string(nranks) +
                           " ranks\n");
          signal_all(ranks, sig);
          terminating = true;
          exit_code = 128 + sig;
          kill_at = Clock::now() + kKillGrace;
        } else {
          signal_all(ranks, sig);
        }
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents) read_stream(*owners[i].first, *owners[i].second);
    }
  }

  // Leftovers: a rank's background children that outlived it, holding our pipes.
  signal_all(ranks, SIGKILL);
  for (auto& r : ranks) {
    for (auto& s : r.streams) {
      if (s.fd >= 0) {
        ::close(s.fd);
        s.fd = -1;
        emit_lines(r, s, true);
      }
    }
  }
  return exit_code;
}

// Strict: digits only (parse_number.h), no sign, spaces or junk.
bool parse_count(const std::string& text, int& n) { return rwin::bootstrap::parse_int_in(text, 1, 4096, n).empty(); }

// Seconds as a plain decimal ("30", "0.5", "1e3"): from_chars takes no spaces, sign '+',
// hex or trailing junk, unlike strtod; nan, inf and <= 0 fail the range check.
bool parse_seconds(const std::string& text, double& s) {
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, s, std::chars_format::general);
  return !text.empty() && ec == std::errc() && ptr == end && s > 0 && s <= 1e7;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = -1;
  double timeout_s = 600;
  std::string root;
  int i = 1;
  auto value_of = [&](const std::string& arg, const std::string& name) -> std::string {
    if (arg.size() > name.size() && arg.compare(0, name.size() + 1, name + "=") == 0)
      return arg.substr(name.size() + 1);
    if (i + 1 >= argc) bad_usage(name + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    }
    const bool glued_n = arg.size() > 2 && arg.compare(0, 2, "-n") == 0;  // "-n4"
    if (arg == "-n" || glued_n || arg == "--np" || arg.rfind("--np=", 0) == 0) {
      const std::string v = glued_n ? arg.substr(2) : value_of(arg, arg == "-n" ? "-n" : "--np");
      if (!parse_count(v, nranks)) {
        bad_usage("-n wants a rank count in 1..4096, got '" + v + "'");
      }
      continue;
    }
    if (arg == "--timeout" || arg.rfind("--timeout=", 0) == 0) {
      const std::string v = value_of(arg, "--timeout");
      if (!parse_seconds(v, timeout_s)) {
        bad_usage("--timeout wants a positive number of seconds, got '" + v + "'");
      }
      continue;
    }
    if (arg == "--root" || arg.rfind("--root=", 0) == 0) {
      root = value_of(arg, "--root");
      try {
        rwin::bootstrap::HostPort::parse(root);
      } catch (const rwin::bootstrap::BootstrapError& e) {
        bad_usage(std::string("--root: ") + e.what());
      }
      continue;
    }
    if (!arg.empty() && arg[0] == '-') bad_usage("unknown option '" + arg + "'");
    break;
  }
  if (nranks < 0) bad_usage("missing -n N");
  if (i >= argc) bad_usage("missing PROGRAM");
  if (root.empty()) {
    const uint16_t port = pick_free_port();
    if (port == 0) {
      std::fprintf(stderr, "rwinrun: cannot find a free port on 127.0.0.1: %s\n", std::strerror(errno));
      return 127;
    }
    root = "127.0.0.1:" + std::to_string(port);
  }
  return run(nranks, timeout_s, root, argv + i);
}

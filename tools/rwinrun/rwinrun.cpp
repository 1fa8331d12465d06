// rwinrun: start N ranks of a program on this machine, wired for rwin's bootstrap.
//
//   rwinrun -n N [--timeout S] [--root host:port] [--no-prefix | --output DIR] [--] PROGRAM ARGS...
//
// Each rank gets RWIN_RANK, RWIN_NRANKS, RWIN_ROOT and RWIN_JOB_KEY (a fresh random key per job
// unless RWIN_JOB_KEY is already set) on top of the inherited environment, runs
// in its own process group (so signals reach whatever it spawned), and has its stdout/stderr
// lines prefixed with "[rank] " (--no-prefix: passed on as they are, still whole lines at a time;
// --output DIR: written by the rank itself to DIR/rank.<r>.out and DIR/rank.<r>.err). The first
// rank to fail (non-zero exit or signal) or the deadline ends the job: the others get SIGTERM, then
// SIGKILL after a grace period.
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

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/parse_number.h"
#include "common/knobs.h"
#include "common/reserved_port.h"
#include "rwin/version.h"
#include "tools/cli.h"

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

struct Config {
  int nranks = -1;
  double timeout_s = 600;
  std::string root;
  bool prefix = true;      // "[rank] " before every line (--no-prefix: none)
  std::string output_dir;  // --output: each rank writes DIR/rank.<r>.out and .err itself
};

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

struct Stream {
  int fd = -1;     // read end of the rank's pipe; -1 at EOF (or none: --output)
  int out_fd = 1;  // where its lines go
  std::string partial;
};

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream streams[2];
};

// Whole lines at a time, so ranks' lines never interleave mid-line. With a prefix an unfinished
// line (at EOF, or longer than kMaxLine) is ended with a newline so the next rank's prefix starts a
// line; without one (--no-prefix) the bytes pass unchanged, so a program's output (a JSON document,
// a line longer than kMaxLine) arrives exactly as written.
void emit_lines(Rank& r, Stream& s, bool flush_partial, bool with_prefix) {
  const std::string prefix = with_prefix ? "[" + std::to_string(r.index) + "] " : "";
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
    out += prefix + s.partial + (with_prefix ? "\n" : "");
    s.partial.clear();
  }
  if (!out.empty()) write_all(s.out_fd, out);
}

void read_stream(Rank& r, Stream& s, bool with_prefix) {
  char buf[65536];
  const ssize_t n = ::read(s.fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    ::close(s.fd);
    s.fd = -1;
    emit_lines(r, s, true, with_prefix);
    return;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  emit_lines(r, s, false, with_prefix);
}

// Signals rwinrun has sent its ranks, so a rank's death by some other signal can be told apart.
uint64_t g_sent_signals = 0;
bool sent_signal(int sig) { return sig > 0 && sig < 64 && (g_sent_signals >> sig) & 1; }

void signal_all(std::vector<Rank>& ranks, int sig) {
  if (sig > 0 && sig < 64) g_sent_signals |= uint64_t{1} << sig;
  for (auto& r : ranks) {
    // The whole process group: a shell rank's `sleep` must go too. Exited leaders still count,
    // their group lives on while any member does.
    if (r.pid > 0) ::kill(-r.pid, sig);
  }
}

// --output: DIR/rank.<r>.out and DIR/rank.<r>.err, truncated. Returns false (with a message) if
// one cannot be opened; `fds` then holds -1 where nothing was opened.
bool open_output_files(const std::string& dir, int rank, int (&fds)[2]) {
  const std::string base = dir + "/rank." + std::to_string(rank);
  const char* ext[2] = {".out", ".err"};
  for (int k = 0; k < 2; ++k) {
    const std::string path = base + ext[k];
    fds[k] = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fds[k] < 0) {
      std::fprintf(stderr, "rwinrun: --output: cannot open '%s' for rank %d: %s\n", path.c_str(), rank,
                   std::strerror(errno));
      if (k == 1) ::close(fds[0]), fds[0] = -1;
      return false;
    }
  }
  return true;
}

int run(const Config& cfg, char** argv) {
  const int nranks = cfg.nranks;
  const double timeout_s = cfg.timeout_s;
  const std::string& root = cfg.root;
  const bool to_files = !cfg.output_dir.empty();
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
    // pipes[k][1] becomes the rank's fd 1 / 2; pipes[k][0] is what we read (-1 with --output: the
    // rank writes its files itself, so nothing passes through us and nothing is prefixed).
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    if (to_files) {
      int files[2];
      if (!open_output_files(cfg.output_dir, i, files)) {
        failed_start = 1;
        break;
      }
      pipes[0][1] = files[0];
      pipes[1][1] = files[1];
    } else if (::pipe2(pipes[0], O_CLOEXEC) != 0 || ::pipe2(pipes[1], O_CLOEXEC) != 0) {
      std::fprintf(stderr, "rwinrun: pipe for rank %d failed: %s\n", i, std::strerror(errno));
      for (auto& p : pipes) {
        for (int fd : p) {
          if (fd >= 0) ::close(fd);
        }
      }
      failed_start = 1;
      break;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "rwinrun: fork of rank %d failed: %s\n", i, std::strerror(errno));
      for (auto& p : pipes) {
        for (int fd : p) {
          if (fd >= 0) ::close(fd);
        }
      }
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
    for (auto& s : r.streams) {
      if (s.fd >= 0) ::fcntl(s.fd, F_SETFL, O_NONBLOCK);
    }
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
    // Reap everything that has exited, then name what went wrong. A rank killed by a signal is named
    // before one that exited with an error in the same sweep: the error is usually its consequence (a
    // survivor learns "peer 2 failed" and exits 1), and waitpid hands zombies back oldest child first,
    // so the survivor would otherwise be named in place of the rank that died.
    std::vector<std::pair<Rank*, int>> reaped;
    for (;;) {
      int st = 0;
      const pid_t pid = ::waitpid(-1, &st, WNOHANG);
      if (pid <= 0) break;
      for (auto& r : ranks) {
        if (r.pid != pid || !r.running) continue;
        r.running = false;
        r.status = st;
        reaped.emplace_back(&r, st);
      }
    }
    std::stable_sort(reaped.begin(), reaped.end(),
                     [](const auto& a, const auto& b) { return WIFSIGNALED(a.second) && !WIFSIGNALED(b.second); });
    for (const auto& [r, st] : reaped) {
      const bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      if (ok) continue;
      const std::string how = WIFSIGNALED(st) ? "killed by signal " + signal_text(WTERMSIG(st))
                                              : "exited with status " + std::to_string(WEXITSTATUS(st));
      const std::string who = "rwinrun: rank " + std::to_string(r->index) + " (pid " + std::to_string(r->pid) + ") ";
      if (!terminating) {
        int others = 0;
        for (auto& o : ranks) others += o.running ? 1 : 0;
        std::string msg = who + how;
        if (others > 0) {
          msg += "; terminating the other " + std::to_string(others) + (others == 1 ? " rank" : " ranks");
        }
        write_all(2, msg + "\n");
        begin_termination(1);
      } else if (WIFSIGNALED(st) && !sent_signal(WTERMSIG(st))) {
        // Died on its own while the job was ending (a crash, an outside kill): named too, since the
        // first line may only show its consequence. Deaths by rwinrun's own signals stay quiet.
        write_all(2, who + how + ", a signal rwinrun did not send\n");
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
      if (fds[i].revents) read_stream(*owners[i].first, *owners[i].second, cfg.prefix);
    }
  }

  // Leftovers: a rank's background children that outlived it, holding our pipes.
  signal_all(ranks, SIGKILL);
  for (auto& r : ranks) {
    for (auto& s : r.streams) {
      if (s.fd >= 0) {
        ::close(s.fd);
        s.fd = -1;
        emit_lines(r, s, true, cfg.prefix);
      }
    }
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  std::vector<std::string> command;
  CLI::App app{"rwinrun: start N ranks of PROGRAM on this machine, wired for rwin's bootstrap.", "rwinrun"};
  rwin::cli::setup(app, RWIN_VERSION_STRING);
  app.add_option("-n,--np", cfg.nranks, "number of ranks to start on this machine")
      ->required()
      ->transform(rwin::cli::Count(1, 4096))
      ->type_name("N");
  app.add_option("--timeout", cfg.timeout_s, "end the job after this long (default 600); exit status 124")
      ->transform(rwin::cli::Seconds(0, 1e7))
      ->type_name("SECONDS");
  app.add_option("--root", cfg.root, "rendezvous address given to the ranks as RWIN_ROOT (default: a free port on 127.0.0.1, held by rwinrun until the job ends)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              rwin::bootstrap::HostPort::parse(v);
            } catch (const rwin::bootstrap::BootstrapError& e) {
              return e.what();
            }
            return {};
          },
          ""))
      ->type_name("HOST:PORT");
  bool no_prefix = false;
  app.add_flag("--no-prefix", no_prefix, "pass the ranks' output on as it is, without the \"[rank] \" prefix");
  app.add_option("--output", cfg.output_dir,
                 "each rank writes its stdout to DIR/rank.<r>.out and its stderr to DIR/rank.<r>.err "
                 "(DIR is created; nothing prefixed)")
      ->type_name("DIR");
  // Everything from PROGRAM on is the program's, options included ("--" before it is optional).
  app.add_option("PROGRAM", command, "the program each rank runs, and its arguments")->required()->type_name("ARGS");
  app.positionals_at_end();
  app.footer(
      "Each rank gets RWIN_RANK, RWIN_NRANKS, RWIN_ROOT and RWIN_JOB_KEY (fresh per job unless already set);\n"
      "output lines are prefixed \"[rank] \" unless --no-prefix or --output. If a rank fails the others are\n"
      "terminated; the line on rwinrun's stderr names the first failure (a rank killed by a signal before one\n"
      "that exited with an error at the same moment), and later deaths by signals rwinrun did not send.\n"
      "Exit: 0 ok, 1 a rank failed, 124 timeout, 128+sig interrupted, 2 usage, 127 could not start.");
  rwin::cli::parse_or_exit(app, argc, argv);
  cfg.prefix = !no_prefix && cfg.output_dir.empty();
  if (!cfg.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cfg.output_dir, ec);
    if (ec || !std::filesystem::is_directory(cfg.output_dir)) {
      std::fprintf(stderr, "rwinrun: --output: cannot create directory '%s': %s\n", cfg.output_dir.c_str(),
                   ec ? ec.message().c_str() : "exists and is not a directory");
      return 127;
    }
  }
  // rwinrun's own root: its port held until run() returns (every rank has ended), common/reserved_port.h
  std::optional<rwin::common::ReservedPort> held;
  if (cfg.root.empty()) {
    held.emplace();
    if (held->port() == 0) {
      std::fprintf(stderr, "rwinrun: cannot find a free port on 127.0.0.1: %s\n", std::strerror(errno));
      return 127;
    }
    cfg.root = "127.0.0.1:" + std::to_string(held->port());
  }
  std::vector<char*> args;
  for (auto& c : command) args.push_back(c.data());
  args.push_back(nullptr);
  return run(cfg, args.data());
}

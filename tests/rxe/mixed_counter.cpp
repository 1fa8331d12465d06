// rwin_mixed_counter: one counter word per rank fed at once by ranks on its own host and by ranks on
// other hosts, with an exact final sum (issue 23, bug 2; docs/CONTRACT.md "Atomics on one word: CPU
// or NIC, never both"). Every rank adds into every rank's word: each round, --local-adds adds of 1 to
// every same-host rank (itself included) and one add to every other-host rank, so the fast same-host
// adds keep landing while the NIC's read-modify-write of the remote adds is under way. If same-host
// adds ran as CPU atomics on the mapped word while remote ones ran on the NIC (IBV_ATOMIC_HCA: atomic
// only against the adapter's own atomics), increments would be lost. Ranks are on the same host when
// their hostnames match. Prints one line per rank (OK or the counts) and exits 0 only if every rank's
// word holds exactly what was sent to it; exits 2 when the job has no mix of same- and other-host peers.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "rwin/rwin.h"
#include "rwin/version.h"
#include "tools/cli.h"

int main(int argc, char** argv) {
  int rounds = 100, local_adds = 200, remote_adds = 1;
  CLI::App app{"rwin_mixed_counter: every rank adds into every rank's counter, same-host and other-host at once",
               "rwin_mixed_counter"};
  rwin::cli::setup(app, rwin::version());
  app.add_option("--rounds", rounds, "rounds (default 100)")->transform(rwin::cli::Count(1, 1 << 24))->type_name("R");
  app.add_option("--local-adds", local_adds, "adds to each same-host rank per round (default 200)")
      ->transform(rwin::cli::Count(1, 1 << 20))
      ->type_name("M");
  app.add_option("--remote-adds", remote_adds, "adds to each other-host rank per round (default 1)")
      ->transform(rwin::cli::Count(1, 1 << 20))
      ->type_name("K");
  rwin::cli::parse_or_exit(app, argc, argv);
  try {
    rwin::Context ctx;
    const int r = ctx.rank(), n = ctx.size();
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const auto hosts = ctx.allgather(std::vector<uint8_t>(host, host + std::string(host).size()));
    std::vector<bool> local(static_cast<size_t>(n));
    int nlocal = 0;
    for (int q = 0; q < n; ++q) {
      local[static_cast<size_t>(q)] = hosts[static_cast<size_t>(q)] == hosts[static_cast<size_t>(r)];
      nlocal += local[static_cast<size_t>(q)] ? 1 : 0;
    }
    std::string modes;
    for (int q = 0; q < n; ++q) modes += " " + std::to_string(q) + ":" + (local[static_cast<size_t>(q)] ? "same-host/" : "other-host/") + ctx.rma_mode(q);
    std::printf("rank %d on %s over %s: peers%s\n", r, host, ctx.transport_name().c_str(), modes.c_str());
    std::fflush(stdout);
    if (nlocal < 2 || nlocal == n) {
      std::fprintf(stderr, "rank %d: needs at least one other rank on this host and one on another (%d of %d here)\n", r,
                   nlocal, n);
      return 2;
    }
    auto sig = ctx.alloc_signals("mixed_counter", 1);
    for (int i = 0; i < rounds; ++i) {
      for (int k = 0; k < n; ++k) {
        const int q = (r + k) % n;  // start at self: the same-host adds come first
        const int times = local[static_cast<size_t>(q)] ? local_adds : remote_adds;
        for (int j = 0; j < times; ++j) ctx.notify(sig.at(0), q, 1, rwin::NotifyOp::AtomicAdd);
      }
    }
    ctx.barrier();  // every rank's adds are complete at their targets
    int64_t want = 0;
    for (int q = 0; q < n; ++q) want += static_cast<int64_t>(rounds) * (local[static_cast<size_t>(q)] ? local_adds : remote_adds);
    const int64_t got = sig.load(0);
    std::printf("rank %d: counter %lld, expected %lld (%d same-host ranks x %d rounds x %d adds + %d other-host ranks x %d rounds x %d adds): %s\n",
                r, static_cast<long long>(got), static_cast<long long>(want), nlocal, rounds, local_adds, n - nlocal,
                rounds, remote_adds, got == want ? "OK" : (got < want ? "FAILED, increments lost" : "FAILED, too many"));
    std::fflush(stdout);
    ctx.barrier();
    return got == want ? 0 : 1;
  } catch (const rwin::Error& e) {
    std::fprintf(stderr, "rwin_mixed_counter: %s\n", e.what());
    return 1;
  }
}

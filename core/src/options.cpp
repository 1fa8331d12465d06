// Reads the RWIN_* variables of rwin::Options through the knob table (common/knobs.h, which
// docs/CONFIG.md is checked against); a field set in code wins and is recorded as such.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "collectives/team_state.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/parse_number.h"
#include "common/knobs.h"
#include "common/log.h"
#include "bootstrap/pmix.h"
#include "reg_cache.h"
#include "rwin/rwin.h"
#include "startup.h"
#include "stats.h"
#include "transport/transport.h"

namespace rwin {
namespace {

constexpr std::chrono::milliseconds kDefaultStartupTimeout{60000};
constexpr std::chrono::milliseconds kDefaultOpTimeout{60000};

// nullptr when unset or empty; records the source for rwin-info (knobs::env).
const char* env(const char* name) { return knobs::env(name); }

// The field was set in code before from_env looked at the variable: say so for rwin-info.
void in_code(const char* name, bool set, const std::string& value) {
  if (set) knobs::set_in_code(name, value);
}

// Strict (bootstrap/parse_number.h): digits and an optional suffix only, no sign, no spaces,
// overflow refused. The message names the variable, the text and the accepted form.
uint64_t parse_size(const char* name, const char* text, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  std::string why = bootstrap::parse_size(text, v);
  if (why.empty() && (v < lo || v > hi)) {
    why = "outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "] bytes";
  }
  if (!why.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string(name) + "='" + text + "' is not a size (" + why +
                                                "); expected " + bootstrap::kSizeForm);
  }
  return v;
}

long parse_int(const char* name, const char* text, long lo, long hi) {
  uint64_t v = 0;
  const std::string why =
      bootstrap::parse_u64_in(text, static_cast<uint64_t>(lo), static_cast<uint64_t>(hi), v);
  if (!why.empty()) {
    throw Error(ErrorCode::InvalidArgument, std::string(name) + "='" + text + "' is not an integer in [" +
                                                std::to_string(lo) + ", " + std::to_string(hi) + "] (" + why +
                                                "); expected decimal digits only");
  }
  return static_cast<long>(v);
}

}  // namespace

std::string detail::evidence_text(const std::vector<std::string>& evidence) {
  std::string s;
  for (size_t i = 0; i < evidence.size(); ++i) s += (i ? ", " : "") + evidence[i];
  return s;
}

namespace {

// What a process that must not run alone is told: what it saw and the ways to give it a bootstrap.
[[noreturn]] void refuse_job_of_one(const std::vector<std::string>& evidence, const std::string& why) {
  throw Error(ErrorCode::InvalidArgument,
              "launch environment: " + detail::evidence_text(evidence) +
                  " show a job of more than one rank, but no bootstrap is reachable (" + why +
                  "); refusing to run as a job of 1. Set RWIN_ROOT=host:port (rank 0 serves it; with RWIN_JOB_KEY "
                  "off loopback) on every rank, or launch with rwinrun, or under a PMIx server (mpirun, "
                  "srun --mpi=pmix)");
}

// Rank, size and root (the "tcp" bootstrap: RWIN_ROOT, rwinrun's variables, or a root derived from
// Open MPI's or Slurm's variables), or, when no launcher is seen, a job of one.
void tcp_launch(Options& o, bootstrap::LaunchEnv& launch) {
  std::optional<bootstrap::LaunchEnv> found;
  try {
    found = bootstrap::LaunchEnv::detect();
  } catch (const bootstrap::BootstrapError& e) {
    throw Error(ErrorCode::InvalidArgument, e.what());
  }
  if (found) {
    launch = *found;
    if (o.rank < 0) o.rank = launch.rank;
    if (o.nranks < 0) o.nranks = launch.nranks;
    if (o.root.empty()) o.root = launch.root;
    return;
  }
  // Not started by a launcher we read: a job of one, unless some launcher variable says otherwise
  // (e.g. PMIX_RANK/PMIX_NAMESPACE in a build without PMIx).
  const auto evidence = bootstrap::LaunchEnv::job_of_many_evidence();
  if (!evidence.empty() && (o.rank < 0 || o.nranks < 0)) {
    const bool root_set = !o.root.empty() || env("RWIN_ROOT") != nullptr;
    std::string why = root_set ? "a root is set, but no launcher variable gives this rank and the job size "
                                 "(RWIN_RANK/RWIN_NRANKS, OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS)"
                               : "RWIN_ROOT is unset";
    if (bootstrap::pmix_server_advertised() && !bootstrap::pmix_built_in()) {
      why += ", and this rwin was built without PMIx (libpmix-dev missing at configure time)";
    } else if (bootstrap::pmix_server_advertised()) {
      why += root_set ? ", and a set root turns PMIx off (unset RWIN_ROOT to use it)"
                      : ", and RWIN_BOOTSTRAP=tcp turned PMIx off";
    }
    refuse_job_of_one(evidence, why);
  }
  launch.source = "";
  launch.how = "no launcher: a job of one";
  if (o.rank < 0) o.rank = 0;
  if (o.nranks < 0) o.nranks = 1;
}

}  // namespace

Options Options::from_env() { return from_env(Options()); }

Options Options::from_env(Options o) { return detail::options_from_env(std::move(o), nullptr); }

Options detail::options_from_env(Options o, bootstrap::LaunchEnv* launch_out, bool caller_store) {
  bootstrap::LaunchEnv launch;
  in_code("RWIN_RANK", o.rank >= 0, std::to_string(o.rank));
  in_code("RWIN_NRANKS", o.nranks >= 0, std::to_string(o.nranks));
  in_code("RWIN_ROOT", !o.root.empty(), o.root);
  in_code("RWIN_TRANSPORT", !o.transport.empty(), o.transport);
  in_code("RWIN_IB_DEVICE", !o.ib_device.empty(), o.ib_device);
  in_code("RWIN_GID_INDEX", o.gid_index >= 0, std::to_string(o.gid_index));
  in_code("RWIN_UCX_RMA", !o.ucx_rma.empty(), o.ucx_rma);
  in_code("RWIN_UCX_TCP_ZCOPY", o.ucx_tcp_zcopy >= 0, std::to_string(o.ucx_tcp_zcopy));
  in_code("RWIN_CHUNK_BYTES", o.chunk_bytes != 0, std::to_string(o.chunk_bytes));
  in_code("RWIN_PIPELINE_DEPTH", o.pipeline_depth > 0, std::to_string(o.pipeline_depth));
  in_code("RWIN_ACCUMULATE_STAGING_BYTES", o.accumulate_staging_bytes != 0, std::to_string(o.accumulate_staging_bytes));
  in_code("RWIN_STARTUP_TIMEOUT_MS", o.startup_timeout.count() > 0, std::to_string(o.startup_timeout.count()));
  in_code("RWIN_TIMEOUT_MS", o.op_timeout.count() > 0, std::to_string(o.op_timeout.count()));
  in_code("RWIN_SPIN_US", o.spin_us >= 0, std::to_string(o.spin_us));
  in_code("RWIN_JOB_KEY", !o.job_key.empty(), "(set)");  // a secret: never printed
  in_code("RWIN_BOOTSTRAP", !o.bootstrap.empty(), o.bootstrap);
  const bool root_in_code = !o.root.empty();
  if (caller_store) {
    // The caller's store is the rendezvous: no root, no launcher, no PMIx (Context(store, ...)).
    o.bootstrap = "store";
    launch.source = "store";
    launch.how = "rank and size given with the caller's store";
  }
  bootstrap::BootstrapMethod method = bootstrap::BootstrapMethod::Tcp;
  if (!caller_store) {
    try {
      method = bootstrap::bootstrap_method(o.bootstrap);
    } catch (const bootstrap::BootstrapError& e) {
      throw Error(ErrorCode::InvalidArgument, e.what());
    }
    if (method == bootstrap::BootstrapMethod::Auto) {
      // A root someone named, or a rank and size the program set, is the tcp bootstrap as before;
      // otherwise a PMIx server, when this build can talk to one.
      const bool named = !o.root.empty() || env("RWIN_ROOT") != nullptr || (o.rank >= 0 && o.nranks >= 0);
      method = (!named && bootstrap::pmix_built_in() && bootstrap::pmix_server_advertised())
                   ? bootstrap::BootstrapMethod::Pmix
                   : bootstrap::BootstrapMethod::Tcp;
    }
    o.bootstrap = bootstrap::bootstrap_method_name(method);
  }
  const bool pmix = !caller_store && method == bootstrap::BootstrapMethod::Pmix;
  if (pmix) {
    if (!bootstrap::pmix_built_in()) {
      throw Error(ErrorCode::InvalidArgument,
                  "RWIN_BOOTSTRAP=pmix: this rwin was built without PMIx (libpmix-dev / pkg-config 'pmix' was "
                  "missing at configure time); rebuild with it, or use RWIN_BOOTSTRAP=tcp with RWIN_ROOT=host:port");
    }
    if (!bootstrap::pmix_server_advertised()) {
      const auto seen = bootstrap::pmix_env_seen();
      throw Error(ErrorCode::InvalidArgument,
                  "RWIN_BOOTSTRAP=pmix, but no PMIx server is advertised: none of PMIX_SERVER_URI41, "
                  "PMIX_SERVER_URI4, PMIX_SERVER_URI3, PMIX_SERVER_URI21, PMIX_SERVER_URI2, PMIX_SERVER_URI nor "
                  "PMIX_NAMESPACE with PMIX_RANK is set" +
                      (seen.empty() ? std::string() : " (seen: " + detail::evidence_text(seen) + ")") +
                      "; launch under mpirun or srun --mpi=pmix, or use RWIN_BOOTSTRAP=tcp with RWIN_ROOT");
    }
    launch.source = "pmix";
    launch.how = "from the PMIx server (at start-up)";
  } else if (caller_store) {
    if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks) {
      throw Error(ErrorCode::InvalidArgument, "rank " + std::to_string(o.rank) + " is outside a job of " +
                                                  std::to_string(o.nranks) + " ranks");
    }
  } else if (o.rank < 0 || o.nranks < 0) {
    tcp_launch(o, launch);
  } else {
    launch.source = "options";
    launch.how = "rank and size set by the program";
  }
  if (!pmix && !caller_store) {
    if (o.root.empty()) {
      if (const char* v = env("RWIN_ROOT")) o.root = v;
    }
    if (o.root.empty() && o.nranks == 1) o.root = "127.0.0.1:0";  // nobody else needs to find us
    if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks) {
      throw Error(ErrorCode::InvalidArgument, "rank " + std::to_string(o.rank) + " is outside a job of " +
                                                  std::to_string(o.nranks) + " ranks");
    }
    if (o.root.empty()) {
      std::string seen = launch.how.empty() ? std::string() : " (" + launch.how + ")";
      throw Error(ErrorCode::InvalidArgument,
                  "rank " + std::to_string(o.rank) + " of " + std::to_string(o.nranks) + seen +
                      ": no rendezvous address, so no bootstrap is reachable and this process will not run as a "
                      "job of 1: set RWIN_ROOT=host:port (rank 0 serves it) or launch with rwinrun, or under a PMIx "
                      "server (mpirun, srun --mpi=pmix)");
    }
  }
  if (o.transport.empty()) {
    const char* v = env("RWIN_TRANSPORT");
    o.transport = v ? v : "auto";
  }
  {
    static const char* const kTransports[] = {"auto", "ucx", "tcp", "mixed", "verbs"};
    // A Transport error, as when the transport layer refused the name itself (before auto existed).
    if (std::find(std::begin(kTransports), std::end(kTransports), o.transport) == std::end(kTransports)) {
      throw Error(ErrorCode::Transport, "unknown transport '" + o.transport +
                                            "' (Options::transport / RWIN_TRANSPORT; known: auto, ucx, tcp, mixed, verbs)");
    }
  }
  // RWIN_HOST_ID: which ranks share a host, when the boot id would say it wrong (docs/CONFIG.md).
  if (const char* v = env("RWIN_HOST_ID")) {
    const std::string id = v;
    if (id.empty() || id.size() > 255 || id.find_first_of(" \t\r\n") != std::string::npos) {
      throw Error(ErrorCode::InvalidArgument, "RWIN_HOST_ID='" + id.substr(0, 64) +
                                                  "' must be 1-255 characters without white space");
    }
  }
  if (o.ib_device.empty()) {
    if (const char* v = env("RWIN_IB_DEVICE")) o.ib_device = v;
  }
  if (const char* v = env("RWIN_IB_PORT")) o.ib_port = static_cast<int>(parse_int("RWIN_IB_PORT", v, 1, 255));
  if (o.gid_index < 0) {
    if (const char* v = env("RWIN_GID_INDEX")) o.gid_index = static_cast<int>(parse_int("RWIN_GID_INDEX", v, 0, 1023));
  }
  // The verbs knobs (RWIN_IB_TC, RWIN_IB_SL, ...): checked here, on every transport, so a bad value
  // fails at start-up naming the variable; the Context reads them again for its transport.
  try {
    (void)transport::VerbsParams::from_env();
  } catch (const transport::TransportError& e) {
    throw Error(ErrorCode::InvalidArgument, e.what());
  }
  // The collectives' knobs and tuning file (RWIN_COLL_*, RWIN_ALLREDUCE*): checked here too, so a bad
  // value or file fails every rank at start-up, not one rank when it makes its first team.
  (void)detail::CollConfig::from_env(o.transport);
  if (o.ucx_rma.empty()) {
    const char* v = env("RWIN_UCX_RMA");
    o.ucx_rma = v ? v : "auto";
  }
  if (o.ucx_tcp_zcopy < 0) {
    const char* v = env("RWIN_UCX_TCP_ZCOPY");
    o.ucx_tcp_zcopy = v ? static_cast<int>(parse_int("RWIN_UCX_TCP_ZCOPY", v, 0, 1)) : 0;
  }
  if (o.ucx_rma != "auto" && o.ucx_rma != "native" && o.ucx_rma != "am") {
    throw Error(ErrorCode::InvalidArgument, "RWIN_UCX_RMA / Options::ucx_rma is '" + o.ucx_rma +
                                                "'; expected auto, native or am");
  }
  // Left at 0 when unset: the Context then takes the transport's measured default.
  if (o.chunk_bytes == 0) {
    if (const char* v = env("RWIN_CHUNK_BYTES")) {
      o.chunk_bytes = static_cast<size_t>(parse_size("RWIN_CHUNK_BYTES", v, 1, SIZE_MAX));
    }
  }
  if (o.pipeline_depth <= 0) {
    if (const char* v = env("RWIN_PIPELINE_DEPTH")) {
      o.pipeline_depth = static_cast<int>(parse_int("RWIN_PIPELINE_DEPTH", v, 1, 4096));
    }
  }
  if (o.accumulate_staging_bytes == 0) {
    const char* v = env("RWIN_ACCUMULATE_STAGING_BYTES");
    o.accumulate_staging_bytes =
        v ? static_cast<size_t>(parse_size("RWIN_ACCUMULATE_STAGING_BYTES", v, 1, size_t{1} << 40)) : size_t{4} << 20;
  }
  if (o.startup_timeout.count() <= 0) {
    const char* v = env("RWIN_STARTUP_TIMEOUT_MS");
    o.startup_timeout = v ? std::chrono::milliseconds(parse_int("RWIN_STARTUP_TIMEOUT_MS", v, 1, 86400000))
                          : kDefaultStartupTimeout;
  }
  if (o.op_timeout.count() <= 0) {
    const char* v = env("RWIN_TIMEOUT_MS");
    o.op_timeout = v ? std::chrono::milliseconds(parse_int("RWIN_TIMEOUT_MS", v, 1, 86400000)) : kDefaultOpTimeout;
  }
  if (o.spin_us < 0) {
    if (const char* v = env("RWIN_SPIN_US")) o.spin_us = static_cast<int>(parse_int("RWIN_SPIN_US", v, 0, 1000000));
  }
  // Under PMIx rank 0 makes a fresh key and hands it out through PMIx (bootstrap/pmix.h).
  if (o.job_key.empty() && !pmix) {
    if (const char* v = env("RWIN_JOB_KEY")) o.job_key = v;  // any non-empty string; "" = no key
  }
  if (caller_store) {
    log::set_rank(o.rank);
    RWIN_LOG(Info, Bootstrap, "rank %d of %d on the caller's store (no root, no lease)", o.rank, o.nranks);
  } else if (!pmix) {  // (under PMIx the Context says it once the PMIx server has spoken)
    log::set_rank(o.rank);
    const std::string ranks_from = launch.source == "options" ? "Options"
                                   : launch.source.empty()    ? "no launcher (a job of one)"
                                                              : "launcher " + launch.source;
    const char* env_root = env("RWIN_ROOT");
    const std::string root_from = root_in_code                          ? "Options::root"
                                  : env_root && o.root == env_root      ? "RWIN_ROOT"
                                  : o.nranks == 1 && o.root == "127.0.0.1:0" ? "a job of one: nobody else needs to find it"
                                                                        : "derived from the " + launch.source + " launcher's variables";
    RWIN_LOG(Info, Bootstrap, "rank %d of %d from %s; root %s from %s", o.rank, o.nranks, ranks_from.c_str(),
             o.root.c_str(), root_from.c_str());
  }
  if (launch_out) *launch_out = std::move(launch);
  return o;
}

int reg_cache_from_env() {
  const char* v = env("RWIN_REG_CACHE");
  return v ? static_cast<int>(parse_int("RWIN_REG_CACHE", v, 0, 1)) : 1;
}

int stats_from_env() {
  const char* v = env("RWIN_STATS");
  return v ? static_cast<int>(parse_int("RWIN_STATS", v, 0, 1)) : 0;
}

}  // namespace rwin

// Reads the RWIN_* variables of rwin::Options through the knob table (common/knobs.h, which
// docs/CONFIG.md is checked against); a field set in code wins and is recorded as such.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bootstrap/bootstrap.h"
#include "bootstrap/parse_number.h"
#include "common/knobs.h"
#include "common/log.h"
#include "reg_cache.h"
#include "rwin/rwin.h"

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

Options Options::from_env() { return from_env(Options()); }

Options Options::from_env(Options o) {
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
  // Where rank, size and root came from, for the start-up log line.
  std::string ranks_from = o.rank >= 0 && o.nranks >= 0 ? "Options" : "";
  std::string root_from = o.root.empty() ? "" : "Options::root";
  if (o.rank < 0 || o.nranks < 0) {
    std::optional<bootstrap::LaunchEnv> launch;
    try {
      launch = bootstrap::LaunchEnv::detect();
    } catch (const bootstrap::BootstrapError& e) {
      throw Error(ErrorCode::InvalidArgument, e.what());
    }
    if (launch) {
      if (o.rank < 0) o.rank = launch->rank;
      if (o.nranks < 0) o.nranks = launch->nranks;
      ranks_from = "launcher " + launch->source;
      if (o.root.empty() && !launch->root.empty()) {
        o.root = launch->root;
        const char* r = env("RWIN_ROOT");
        root_from = r && o.root == r ? "RWIN_ROOT" : "derived from the " + launch->source + " launcher's variables";
      }
    } else {
      // Not started by a launcher: a job of one.
      if (o.rank < 0) o.rank = 0;
      if (o.nranks < 0) o.nranks = 1;
      ranks_from = "no launcher (a job of one)";
    }
  }
  if (o.root.empty()) {
    if (const char* v = env("RWIN_ROOT")) o.root = v, root_from = "RWIN_ROOT";
  }
  if (o.root.empty() && o.nranks == 1) o.root = "127.0.0.1:0", root_from = "a job of one: nobody else needs to find it";
  if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks) {
    throw Error(ErrorCode::InvalidArgument, "rank " + std::to_string(o.rank) + " is outside a job of " +
                                                std::to_string(o.nranks) + " ranks");
  }
  if (o.root.empty()) {
    throw Error(ErrorCode::InvalidArgument,
                "rank " + std::to_string(o.rank) + " of " + std::to_string(o.nranks) +
                    ": no rendezvous address: set RWIN_ROOT=host:port (rank 0 serves it) or launch with rwinrun");
  }
  if (o.transport.empty()) {
    const char* v = env("RWIN_TRANSPORT");
    o.transport = v ? v : "ucx";
  }
  if (o.ib_device.empty()) {
    if (const char* v = env("RWIN_IB_DEVICE")) o.ib_device = v;
  }
  if (const char* v = env("RWIN_IB_PORT")) o.ib_port = static_cast<int>(parse_int("RWIN_IB_PORT", v, 1, 255));
  if (o.gid_index < 0) {
    if (const char* v = env("RWIN_GID_INDEX")) o.gid_index = static_cast<int>(parse_int("RWIN_GID_INDEX", v, 0, 1023));
  }
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
  if (o.job_key.empty()) {
    if (const char* v = env("RWIN_JOB_KEY")) o.job_key = v;  // any non-empty string; "" = no key
  }
  log::set_rank(o.rank);
  RWIN_LOG(Info, Bootstrap, "rank %d of %d from %s; root %s from %s", o.rank, o.nranks, ranks_from.c_str(),
           o.root.c_str(), root_from.c_str());
  return o;
}

int reg_cache_from_env() {
  const char* v = env("RWIN_REG_CACHE");
  return v ? static_cast<int>(parse_int("RWIN_REG_CACHE", v, 0, 1)) : 1;
}

}  // namespace rwin

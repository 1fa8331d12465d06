// Rank/size/root from the launcher's environment variables.
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "bootstrap/bootstrap.h"
#include "bootstrap/netif.h"
#include "bootstrap/parse_number.h"
#include "common/knobs.h"

namespace rwin::bootstrap {

namespace {

struct Source {
  const char* name;  // LaunchEnv::source
  const char* rank_var;
  const char* size_var;
};

// Precedence order (CONTRACT.md): our own launcher first, then mpirun flavours, then Slurm.
constexpr Source kSources[] = {
    {"rwin", "RWIN_RANK", "RWIN_NRANKS"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS"},
};

// Digits only (parse_number.h): no sign, spaces or junk; at most INT_MAX.
int parse_int(const char* var, const char* text) {
  int value = 0;
  const std::string why = parse_int_in(text, 0, std::numeric_limits<int>::max(), value);
  if (!why.empty()) {
    throw BootstrapError(BootstrapError::Kind::Config, std::string("launch environment: ") + var + "='" + text +
                                                           "' is not a rank or size (" + why +
                                                           "); expected decimal digits only");
  }
  return value;
}

// The rendezvous address for a job found through `source`: RWIN_ROOT when set; otherwise, under
// Open MPI or Slurm, the address every rank derives alike from the launcher's own variables
// (netif.h, derive_launcher_root: mpirun's out-of-band address or the step's first node,
// and a port from the job id). `how` says which.
std::string root_for(const Source& source, std::string& how) {
  const char* root = knobs::env("RWIN_ROOT");
  if (root != nullptr && *root != '\0') {
    how = "root RWIN_ROOT";
    return root;
  }
  const std::string name = source.name;
  if (name == "openmpi" || name == "slurm") {
    if (auto derived = derive_launcher_root()) {
      how = "root " + derived->root + " derived from " + derived->how;
      return derived->root;
    }
  }
  how = "no root";
  return {};
}

bool above(const char* text, uint64_t limit) {
  uint64_t v = 0;
  return text != nullptr && parse_u64(text, v).empty() && v > limit;
}

}  // namespace

std::optional<LaunchEnv> LaunchEnv::detect() {
  for (const Source& src : kSources) {
    // Our own launcher's variables go through the knob table (rwin-info shows them); the others
    // belong to their launchers.
    const bool ours = std::string_view(src.name) == "rwin";
    const char* rank_text = ours ? knobs::env(src.rank_var, false) : std::getenv(src.rank_var);
    if (rank_text == nullptr) continue;  // a launcher always sets the rank; without it, not this one
    const char* size_text = ours ? knobs::env(src.size_var, false) : std::getenv(src.size_var);
    if (size_text == nullptr) {
      throw BootstrapError(BootstrapError::Kind::Config, std::string("launch environment: ") + src.rank_var +
                                                             " is set but " + src.size_var + " is not");
    }
    LaunchEnv env;
    env.rank = parse_int(src.rank_var, rank_text);
    env.nranks = parse_int(src.size_var, size_text);
    env.source = src.name;
    if (env.nranks < 1) {
      throw BootstrapError(BootstrapError::Kind::Config, std::string("launch environment: ") + src.size_var + "=" +
                                                             std::to_string(env.nranks) + " must be at least 1");
    }
    if (env.rank < 0 || env.rank >= env.nranks) {
      throw BootstrapError(BootstrapError::Kind::Config, std::string("launch environment: ") + src.rank_var + "=" +
                                                             std::to_string(env.rank) + " is outside [0, " +
                                                             std::to_string(env.nranks) + ") given by " + src.size_var);
    }
    std::string root_how;
    env.root = root_for(src, root_how);
    env.how = std::string("rank ") + src.rank_var + "=" + rank_text + ", size " + src.size_var + "=" + size_text +
              ", " + root_how;
    return env;
  }
  return std::nullopt;
}

std::vector<std::string> LaunchEnv::job_of_many_evidence() {
  std::vector<std::string> seen;
  auto note = [&](const char* var) { seen.push_back(std::string(var) + "=" + std::getenv(var)); };
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"}) {
    if (above(std::getenv(var), 1)) note(var);
  }
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (above(std::getenv(var), 0)) note(var);
  }
  const char* ns = std::getenv("PMIX_NAMESPACE");
  const char* rank = std::getenv("PMIX_RANK");
  if (rank != nullptr && *rank != '\0' && (above(rank, 0) || (ns != nullptr && *ns != '\0'))) {
    if (ns != nullptr && *ns != '\0') note("PMIX_NAMESPACE");
    note("PMIX_RANK");
  }
  return seen;
}

BootstrapMethod bootstrap_method(const std::string& text) {
  std::string value = text;
  const char* var = "Options::bootstrap";
  if (value.empty()) {
    const char* v = knobs::env("RWIN_BOOTSTRAP");
    value = v ? v : "";
    var = "RWIN_BOOTSTRAP";
  }
  if (value.empty() || value == "auto") return BootstrapMethod::Auto;
  if (value == "tcp") return BootstrapMethod::Tcp;
  if (value == "pmix") return BootstrapMethod::Pmix;
  throw BootstrapError(BootstrapError::Kind::Config, std::string(var) + "='" + value +
                                                         "' is not a bootstrap; expected pmix, tcp or auto");
}

const char* bootstrap_method_name(BootstrapMethod m) noexcept {
  switch (m) {
    case BootstrapMethod::Tcp: return "tcp";
    case BootstrapMethod::Pmix: return "pmix";
    default: return "auto";
  }
}

}  // namespace rwin::bootstrap

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
// (netif.h, derive_root_from_launcher: mpirun's out-of-band address or the step's first node,
// and a port from the job id).
std::string root_for(const Source& source) {
  const char* root = knobs::env("RWIN_ROOT");
  if (root != nullptr && *root != '\0') return root;
  const std::string name = source.name;
  if (name == "openmpi" || name == "slurm") {
    if (auto derived = derive_root_from_launcher()) return *derived;
  }
  return {};
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
    env.root = root_for(src);
    return env;
  }
  return std::nullopt;
}

}  // namespace rwin::bootstrap

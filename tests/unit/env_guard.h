// EnvGuard: one test's environment. It clears every launcher and bootstrap variable (the suite may
// itself run under rwinrun, mpirun or srun, which set some of them), plus any the test names, and
// on destruction restores every variable it cleared or the test set or unset through it.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>

namespace rwin::test {

class EnvGuard {
 public:
  // What rwinrun, Open MPI, PMI, Slurm and a PMIx server leave in a rank's environment.
  static constexpr const char* kLauncherVars[] = {
      "RWIN_RANK", "RWIN_NRANKS", "RWIN_ROOT", "RWIN_JOB_KEY", "RWIN_BOOTSTRAP", "RWIN_IFNAME",
      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid",
      "OMPI_MCA_orte_local_daemon_uri", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS",
      "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
      "SLURMD_NODENAME", "PMIX_RANK", "PMIX_NAMESPACE", "PMIX_SERVER_URI41", "PMIX_SERVER_URI4",
      "PMIX_SERVER_URI3", "PMIX_SERVER_URI21", "PMIX_SERVER_URI2", "PMIX_SERVER_URI"};

  explicit EnvGuard(std::initializer_list<const char*> also_clear = {}) {
    for (const char* v : kLauncherVars) unset(v);
    for (const char* v : also_clear) unset(v);
  }
  ~EnvGuard() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        ::setenv(name.c_str(), old->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  void set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    remember(name);
    ::unsetenv(name);
  }

 private:
  void remember(const char* name) {
    if (saved_.count(name) != 0) return;
    const char* old = std::getenv(name);
    saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace rwin::test

// PMIx: rank, size and the rendezvous from the launcher's PMIx server (Open MPI's mpirun, srun --mpi=pmix).
//
// Under a PMIx server nobody needs to set RWIN_ROOT or RWIN_JOB_KEY: rank 0 serves the bootstrap
// store on an ephemeral port with a fresh job key and hands "host:port" and the key to the others
// through PMIx (put, commit, fence, get). PMIx clients are authenticated by their server, so the key
// never leaves the job's PMIx data. The store still runs: its leases are rwin's failure detector and
// it serves teams and point-to-point handshakes (bootstrap.h).
//
// Only bootstrap/ and the core's start-up glue include this header; it does not include <pmix.h>.
// Built without PMIx (RWIN_HAVE_PMIX undefined), PmixSession's constructor throws "built without PMIx".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace rwin::bootstrap {

// Whether this build links libpmix.
bool pmix_built_in() noexcept;

// The variables a PMIx server leaves for its clients that are set here, as "NAME=value" in a fixed
// order (PMIX_NAMESPACE, PMIX_RANK, PMIX_SERVER_URI41 ... PMIX_SERVER_URI): for messages.
std::vector<std::string> pmix_env_seen();

// A PMIx server is advertised: a PMIX_SERVER_URI* variable is set, or PMIX_NAMESPACE and PMIX_RANK
// are (how a PMIx launcher marks its clients).
bool pmix_server_advertised();

// One PMIx client session: PMIx_Init in the constructor, PMIx_Finalize in the destructor.
class PmixSession {
 public:
  // The process's session, made by the first call and kept until the process exits (its destructor, a
  // static one, finalizes): every rwin::Context of the process shares it. Not one per Context because
  // a rank that finalizes and re-initializes while another is still finalizing makes the server end
  // the next fence with PMIX_ERR_PARTIAL_SUCCESS (seen with Open MPI 4.1.4 and PMIx 4.2.2). A failed
  // start is not kept: the next call tries again.
  static std::shared_ptr<PmixSession> process_session(Millis timeout);

  // Connects to the server and reads rank, job size and whether every rank is on this node, each
  // step bounded by `timeout` (PMIx_Init, which has no deadline of its own, on a thread the caller
  // stops waiting for: BootstrapError(Timeout) naming it and the PMIx variables seen; every later
  // session of the process then fails the same way at once). A failing PMIx call throws
  // BootstrapError(Config) naming the PMIx status and the PMIx variables seen.
  explicit PmixSession(Millis timeout);
  ~PmixSession();  // PMIx_Finalize; never throws
  PmixSession(const PmixSession&) = delete;
  PmixSession& operator=(const PmixSession&) = delete;

  int rank() const noexcept;
  int nranks() const noexcept;
  const std::string& nspace() const noexcept;  // the job's PMIx namespace

  // Collective: the job's Bootstrap. Rank 0 binds the store on an ephemeral port at an address the
  // other ranks can reach (serve_address below), generates a 32-byte job key and publishes both;
  // every rank fences (bounded by cfg.startup_timeout) and reads them from rank 0; then the normal
  // Bootstrap runs with that key. `root` gets the store's "host:port", `root_how` where it came from
  // (for messages and logs).
  std::unique_ptr<Bootstrap> bootstrap(BootstrapConfig cfg, std::string& root, std::string& root_how);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rwin::bootstrap

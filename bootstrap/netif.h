// Network interface choice and launcher-derived rendezvous addresses.
//
// Two questions every multi-host start-up must answer before the first byte moves:
//  1. Which local interface talks to the others? (A host may have a management network, a fast
//     fabric and a loopback; the bootstrap and UCX must both use the one that reaches the root.)
//  2. Where is the root, when the user did not say (RWIN_ROOT unset)? Some launchers leave enough
//     in the environment to work it out the same way on every rank.
//
// IPv4 only: the bootstrap's own addresses are IPv4 and so is every cluster we target. All functions
// are stateless and thread-safe (getifaddrs/getaddrinfo are reentrant); they read the environment.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rwin::bootstrap {

// Every interface that has an IPv4 address, as (name, dotted address), in getifaddrs order.
// An interface with several IPv4 addresses appears once per address. Includes "lo".
std::vector<std::pair<std::string, std::string>> list_ipv4_interfaces();

// The interface this process should use to reach `root_host` (a dotted IPv4 address or a name that
// resolves to one; no port).
//  - RWIN_IFNAME set and non-empty: that interface, which must exist and carry an IPv4 address.
//  - otherwise: the interface that owns the source address the kernel picks for a datagram to
//    root_host (a UDP socket is connect()ed, which only consults the routing table and sends
//    nothing, then getsockname() gives the local address, mapped to its interface by getifaddrs).
// So a root on 127.0.0.1 gives "lo", and a root on another host gives the interface of the route
// to it, not the one of the default route.
// Throws BootstrapError(Config) naming root_host, the reason and every interface seen.
// Name resolution uses getaddrinfo, whose deadline is the resolver's (resolv.conf timeout/attempts).
std::string choose_interface(const std::string& root_host);

// The IPv4 address a root on this host binds so that ranks on other hosts can reach it (used when
// nobody named the root: the PMIx bootstrap, pmix.h). Rules, first that applies:
//  1. RWIN_IFNAME set: that interface's address (an error if it has none);
//  2. `peer_host` (a host running other ranks; "" = unknown): the address of the interface that routes
//     to it (choose_interface), unless that route is loopback;
//  3. this host's name (gethostname) resolves to a non-loopback address an interface owns: that one;
//  4. the address of the default route's interface (/proc/net/route).
// `how` says which rule chose it. Throws BootstrapError(Config) naming each rule's outcome, the
// interfaces seen and RWIN_IFNAME as the fix.
std::string choose_serve_address(const std::string& peer_host, std::string& how);

// What an Open MPI or Slurm launch says about the rendezvous, when RWIN_ROOT is unset.
struct LauncherRoot {
  std::string root;    // "host:port", every rank of one job computes the same string
  std::string source;  // "openmpi" or "slurm"
  std::string how;     // which variables gave host and port, for log lines and error messages
  // Whether this process runs on the root's host, when the launcher says so (Open MPI: our local
  // daemon is mpirun itself; Slurm: SLURMD_NODENAME equals the root host). Rank 0 serves the store
  // and must run there: if this is false on rank 0, the derivation does not fit the job (e.g.
  // mpirun on a login node that runs no ranks) and RWIN_ROOT must be set by hand.
  std::optional<bool> on_root_host;
};

// Derivation rules (documented in docs/SCALING.md, "Launchers"):
//  Open MPI (OMPI_COMM_WORLD_SIZE set): host = first IPv4 address of the tcp:// entry in
//    OMPI_MCA_orte_hnp_uri (mpirun's own out-of-band address, e.g. "123.0;tcp://10.0.0.5,10.1.0.5:4001");
//    port = derived_port(OMPI_MCA_ess_base_jobid).
//  Slurm (SLURM_PROCID set): host = first host name of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST,
//    else SLURM_NODELIST), expanded from a hostlist expression like "node[07-09,12],gpu1" -> "node07",
//    because task 0 runs on the step's first node under srun's default block distribution;
//    port = derived_port(SLURM_JOB_ID * 1000 + SLURM_STEP_ID), so concurrent steps differ.
// Returns nullopt when neither launcher is present or its variables are malformed (never throws).
std::optional<LauncherRoot> derive_launcher_root();

// Just the "host:port" of derive_launcher_root(); what LaunchEnv::detect needs.
std::optional<std::string> derive_root_from_launcher();

// The port every rank of one job derives from the launcher's job number: 20000 + id % 12000, i.e. in
// [20000, 31999], below Linux's default ephemeral range (32768-60999) so that outgoing connections
// of other programs do not take it first.
unsigned derived_port(unsigned long long job_id);

// First host of a Slurm hostlist expression ("a[01-03,7],b" -> "a01"); empty if unparsable.
std::string first_host_of_hostlist(const std::string& hostlist);

}  // namespace rwin::bootstrap

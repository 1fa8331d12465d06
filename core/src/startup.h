// Start-up glue between Options and the bootstrap (options.cpp, context.cpp).
#pragma once

#include "bootstrap/bootstrap.h"
#include "rwin/rwin.h"

namespace rwin::detail {

// Options::from_env, also saying where rank, size and root came from (`launch`, may be null). With
// bootstrap "pmix" it leaves those to pmix_start (context.cpp), which fills launch->source "pmix".
// `caller_store`: the rendezvous is a store the caller gave (Context(store, ...)): base.rank and
// base.nranks are set, no root, launcher or PMIx is looked for, bootstrap becomes "store".
Options options_from_env(Options base, bootstrap::LaunchEnv* launch, bool caller_store = false);

// "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=4" for an error that refuses to run as a job of one.
std::string evidence_text(const std::vector<std::string>& evidence);

}  // namespace rwin::detail

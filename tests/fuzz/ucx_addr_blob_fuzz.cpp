// The UCX worker-address blob exchanged at connect (transport/ucx/ucx_blob.h, parse_addr).
// Properties: a blob that parses packs back to exactly the input; the worker address and the
// probe key are disjoint pieces of the input, in that order.
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_check.h"
#include "transport/ucx/ucx_blob.h"

namespace ub = rwin::transport::ucx_blob;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto a = ub::parse_addr(std::span<const uint8_t>(data, size));
  if (!a) return 0;
  FUZZ_CHECK(a->address.data() == data + 16);
  FUZZ_CHECK(a->address.data() + a->address.size() + 16 == a->probe_key.data());
  FUZZ_CHECK(a->probe_key.data() + a->probe_key.size() == data + size);
  FUZZ_CHECK(ub::pack_addr(a->address, a->probe_base, a->probe_key) == std::vector<uint8_t>(data, data + size));
  return 0;
}

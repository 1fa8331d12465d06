// The hidden lock table of every window buffer: one 8-byte lock word per stripe of the buffer,
// held by whoever applies a put(Add) to elements of that stripe (accumulate.cpp, staging.cpp).
//
// Layout of a buffer's registered region: [0, bytes) the user's memory, then at lock_offset(bytes)
// stripe_count(bytes) lock words. The user-visible size stays `bytes`; the peers' keys cover the
// whole region, so a peer whose memory is mapped here (UCX direct) reaches the lock words through
// the same mapping. A lock word is 0 when free, holder rank + 1 when held, and is only ever touched
// with CPU atomics (in this process's memory or on a shared mapping of it), never by the NIC: the
// one discipline every put(Add) path follows (docs/CONTRACT.md, "Accumulate").
//
// An element belongs to the stripe holding its first byte; views start at multiples of their
// element size and stripes are multiples of 8 bytes, so no element straddles two stripes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rwin::detail {

// 64 KiB: a lock (one CAS and one store) costs ~nothing against the ~2-4 us element loop it guards,
// and 5 ranks adding into one 1.2 MB window all at once still reach 0.9x put bandwidth on shared
// memory (bench/RESULTS.md, "put(Add) at bandwidth"). Other sizes were not measured against it.
constexpr uint64_t kStripeBytes = uint64_t{64} << 10;

constexpr uint64_t lock_offset(uint64_t bytes) noexcept { return (bytes + 63) & ~uint64_t{63}; }
constexpr uint64_t stripe_count(uint64_t bytes) noexcept { return bytes == 0 ? 1 : (bytes + kStripeBytes - 1) / kStripeBytes; }
// Bytes to allocate for a buffer of `bytes` user bytes, lock table included.
constexpr uint64_t region_bytes(uint64_t bytes) noexcept { return lock_offset(bytes) + stripe_count(bytes) * 8; }

// The end (buffer offset) of the piece of [from, end) that lies in from's stripe.
constexpr uint64_t stripe_piece_end(uint64_t from, uint64_t end) noexcept {
  const uint64_t boundary = (from / kStripeBytes + 1) * kStripeBytes;
  return boundary < end ? boundary : end;
}

// One try: 0 -> holder. Returns what the word held (0: now ours).
inline uint64_t try_lock(uint64_t* word, uint64_t holder) noexcept {
  uint64_t expected = 0;
  std::atomic_ref<uint64_t>(*word).compare_exchange_strong(expected, holder, std::memory_order_acquire,
                                                           std::memory_order_relaxed);
  return expected;
}
inline void unlock(uint64_t* word) noexcept { std::atomic_ref<uint64_t>(*word).store(0, std::memory_order_release); }

}  // namespace rwin::detail

// The job key's cryptography (OpenSSL libcrypto), used by bootstrap/, the agent and the tcp
// transport, kept behind plain functions so nothing else in rwin includes or links OpenSSL.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace rwin::bootstrap::auth {

using Mac = std::array<uint8_t, 32>;

// Cryptographically random bytes (RAND_bytes); throws BootstrapError(Config) if the generator
// cannot deliver.
void random_bytes(uint8_t* out, size_t n);
// HMAC-SHA256(key, label | data). `key` may be empty (a loopback job without a key).
Mac hmac(const std::string& key, const char* label, std::span<const uint8_t> data);
// Constant-time comparison (CRYPTO_memcmp).
bool equal(const uint8_t* a, const uint8_t* b, size_t n);
// A fresh job key: 32 random bytes as 64 lowercase hex digits.
std::string new_job_key();

}  // namespace rwin::bootstrap::auth

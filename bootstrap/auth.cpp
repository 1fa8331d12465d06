// The job key's cryptography: OpenSSL's HMAC-SHA256, RAND_bytes and CRYPTO_memcmp.
#include "bootstrap/auth.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <climits>
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace rwin::bootstrap::auth {

namespace {
std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "no OpenSSL error queued";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}
}  // namespace

void random_bytes(uint8_t* out, size_t n) {
  if (n > INT_MAX || RAND_bytes(out, static_cast<int>(n)) != 1) {
    throw BootstrapError(BootstrapError::Kind::Config,
                         "cannot draw " + std::to_string(n) + " random bytes (RAND_bytes): " + openssl_error());
  }
}

Mac hmac(const std::string& key, const char* label, std::span<const uint8_t> data) {
  std::vector<uint8_t> msg;
  const size_t label_len = std::strlen(label);
  msg.reserve(label_len + data.size());
  msg.insert(msg.end(), label, label + label_len);
  msg.insert(msg.end(), data.begin(), data.end());
  Mac out{};
  unsigned int out_len = 0;
  // HMAC with a zero-length key is well defined; a non-null pointer keeps OpenSSL from treating
  // it as "reuse the previous key".
  static const uint8_t kEmpty = 0;
  const void* k = key.empty() ? static_cast<const void*>(&kEmpty) : key.data();
  if (HMAC(EVP_sha256(), k, static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &out_len) == nullptr ||
      out_len != out.size()) {
    throw BootstrapError(BootstrapError::Kind::Config, "HMAC-SHA256 failed: " + openssl_error());
  }
  return out;
}

bool equal(const uint8_t* a, const uint8_t* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

std::string new_job_key() {
  uint8_t raw[32];
  random_bytes(raw, sizeof raw);
  static const char* hex = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : raw) {
    s.push_back(hex[b >> 4]);
    s.push_back(hex[b & 15]);
  }
  OPENSSL_cleanse(raw, sizeof raw);
  return s;
}

}  // namespace rwin::bootstrap::auth

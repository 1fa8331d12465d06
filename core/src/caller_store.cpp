// The caller's rwin::Store (rwin/store.h) as the bootstrap layer's Store: its answers and
// exceptions become the bootstrap's (a timeout is Timeout; anything else thrown is Connection,
// naming the call and the key), so the bootstrap's collectives and messages work unchanged.
#include "caller_store.h"

#include <exception>
#include <unordered_set>

namespace rwin::detail {

namespace {

using bootstrap::BootstrapError;
using Kind = BootstrapError::Kind;

class AdaptedStore final : public bootstrap::Store {
 public:
  explicit AdaptedStore(std::shared_ptr<rwin::Store> s) : s_(std::move(s)) {}

  void set(const std::string& key, std::span<const uint8_t> value) override {
    guard("set", key, [&] {
      s_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      return 0;
    });
  }
  bootstrap::Bytes get(const std::string& key, bootstrap::Millis timeout) override {
    auto v = guard("get", key, [&] { return s_->get(key, timeout); });
    if (!v) throw BootstrapError(Kind::Timeout, "the caller's store: get('" + key + "') timed out");
    return std::move(*v);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return guard("add", key, [&] { return s_->add(key, delta); });
  }
  std::vector<bool> check(const std::vector<std::string>& keys) override {
    // rwin writes each key once and never deletes one, so a key seen is remembered and not asked for
    // again: a barrier polling for late ranks asks only about those. The caller's check answers for a
    // whole list (torch's shape): ask per key only when some of the unseen ones is missing.
    std::vector<bool> out(keys.size(), false);
    std::vector<std::string> unseen;
    for (size_t i = 0; i < keys.size(); ++i) {
      out[i] = seen_.count(keys[i]) > 0;
      if (!out[i]) unseen.push_back(keys[i]);
    }
    if (unseen.empty()) return out;
    const bool all = guard("check", unseen.front(), [&] { return s_->check(unseen); });
    for (size_t i = 0; i < keys.size(); ++i) {
      if (out[i]) continue;
      out[i] = all || guard("check", keys[i], [&] { return s_->check({keys[i]}); });
      if (out[i]) seen_.insert(keys[i]);
    }
    return out;
  }
  void wait(const std::vector<std::string>& keys, bootstrap::Millis timeout) override {
    const std::string first = keys.empty() ? std::string() : keys.front();
    if (!guard("wait", first, [&] { return s_->wait(keys, timeout); })) {
      throw BootstrapError(Kind::Timeout, "the caller's store: wait for " + std::to_string(keys.size()) +
                                              " keys from '" + first + "' timed out");
    }
  }

 private:
  template <class F>
  auto guard(const char* call, const std::string& key, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const BootstrapError&) {
      throw;
    } catch (const rwin::Error& e) {
      const Kind k = e.code() == ErrorCode::Timeout ? Kind::Timeout : Kind::Connection;
      throw BootstrapError(k, std::string("the caller's store: ") + call + "('" + key + "') failed: " + e.what());
    } catch (const std::exception& e) {
      throw BootstrapError(Kind::Connection,
                           std::string("the caller's store: ") + call + "('" + key + "') failed: " + e.what());
    } catch (...) {
      throw BootstrapError(Kind::Connection,
                           std::string("the caller's store: ") + call + "('" + key + "') failed: an unknown exception");
    }
  }
  std::shared_ptr<rwin::Store> s_;
  std::unordered_set<std::string> seen_;  // keys known to exist (check)
};

}  // namespace

std::shared_ptr<bootstrap::Store> adapt_store(std::shared_ptr<rwin::Store> store) {
  return std::make_shared<AdaptedStore>(std::move(store));
}

}  // namespace rwin::detail

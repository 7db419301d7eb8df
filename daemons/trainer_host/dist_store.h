#pragma once
// The trainers' rendezvous store as a c10d::Store (private to trainer-host):
// what ProcessGroupGloo exchanges its pairs' addresses through. Every call
// goes to client::RendezvousClient (authenticated, with deadlines); a failure
// becomes the exception c10d expects, carrying dgld's message.

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "client/rendezvous_store.h"

namespace dgld::trainer::dist {

class DistStore final : public c10d::Store {
 public:
  explicit DistStore(std::unique_ptr<client::RendezvousClient> client)
      : c10d::Store(client->timeout()), client_(std::move(client)) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override { ok_or_throw(client_->set(key, value)); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return value(client_->compare_set(key, expected, desired));
  }
  std::vector<uint8_t> get(const std::string& key) override {
    client_->set_timeout(timeout_);
    return value(client_->get(key));
  }
  int64_t add(const std::string& key, int64_t delta) override { return value(client_->add(key, delta)); }
  bool deleteKey(const std::string& key) override { return value(client_->remove(key)); }
  bool check(const std::vector<std::string>& keys) override { return value(client_->check(keys)); }
  int64_t getNumKeys() override { return value(client_->num_keys()); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    ok_or_throw(client_->wait(keys, timeout));
  }

 private:
  static void ok_or_throw(const Status& st) {
    if (!st.is_ok()) throw std::runtime_error(st.message());
  }
  template <typename T>
  static T value(Result<T> r) {
    ok_or_throw(r.status());
    return std::move(r).value();
  }
  std::unique_ptr<client::RendezvousClient> client_;
};

}  // namespace dgld::trainer::dist

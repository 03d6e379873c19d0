// File: worker/src/http_store.h
//
// Gloo's rendezvous store over the control protocol's HTTP key-value store
// (PUT/GET /v1/store, control_protocol.h): how the workers of a generation,
// on different nodes, exchange their addresses.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace easyscale {

class HttpStore : public gloo::rendezvous::Store {
 public:
  // `url` http://host:port; `job` scopes the keys; `token` authenticates.
  HttpStore(const std::string& url, std::string job, std::string token,
            std::chrono::milliseconds timeout);
  ~HttpStore() override;
  // Throw std::runtime_error naming the key and the store on failure.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace easyscale

#include "http_store.h"

#include <httplib.h>

#include <stdexcept>
#include <thread>

#include "easyscale/common/control_protocol.h"

namespace easyscale {

struct HttpStore::Impl {
  Impl(const std::string& u, std::string j, std::string t, std::chrono::milliseconds w)
      : url(u), job(std::move(j)), token(std::move(t)), timeout(w), client(u) {
    client.set_connection_timeout(std::chrono::seconds(2));
    client.set_read_timeout(std::chrono::seconds(5));
    client.set_keep_alive(true);
  }
  std::string Path(const std::string& key) const {
    return "/v1/store?job=" + httplib::detail::encode_query_param(job) +
           "&key=" + httplib::detail::encode_query_param(key);
  }
  httplib::Headers Headers() const { return {{kAuthorizationHeader, BearerToken(token)}}; }
  [[noreturn]] void Fail(const std::string& what, const std::string& why) const {
    throw std::runtime_error("rendezvous store " + url + ": " + what + ": " + why);
  }
  // The value of `key`, or nothing while it is not there yet. An unreachable
  // or unready store (a new leader) may still come: the wait's deadline decides.
  // Any other answer (a stale generation, a refused token) ends the wait.
  std::optional<std::string> TryGet(const std::string& key) {
    auto res = client.Get(Path(key), Headers());
    if (!res || res->status == 404 || res->status == 503) return std::nullopt;
    if (res->status != 200) {
      Fail("get " + key,
           "answered " + std::to_string(res->status) + ": " + res->body.substr(0, 200));
    }
    return res->body;
  }

  std::string url, job, token;
  std::chrono::milliseconds timeout;
  httplib::Client client;
};

HttpStore::HttpStore(const std::string& url, std::string job, std::string token,
                     std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(url, std::move(job), std::move(token), timeout)) {}

HttpStore::~HttpStore() = default;

void HttpStore::set(const std::string& key, const std::vector<char>& data) {
  const auto deadline = std::chrono::steady_clock::now() + impl_->timeout;
  for (;;) {
    auto res = impl_->client.Put(impl_->Path(key), impl_->Headers(), data.data(), data.size(),
                                 "application/octet-stream");
    if (res && res->status / 100 == 2) return;
    if (res && res->status / 100 == 4) {  // refused: retrying cannot help
      impl_->Fail("set " + key,
                  "answered " + std::to_string(res->status) + ": " + res->body.substr(0, 200));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      impl_->Fail("set " + key, res ? "answered " + std::to_string(res->status)
                                    : "unreachable: " + httplib::to_string(res.error()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<char> HttpStore::get(const std::string& key) {
  wait({key});
  std::optional<std::string> value = impl_->TryGet(key);
  if (!value) impl_->Fail("get " + key, "the key went away");
  return std::vector<char>(value->begin(), value->end());
}

void HttpStore::wait(const std::vector<std::string>& keys) { wait(keys, impl_->timeout); }

void HttpStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(2);
  for (const std::string& key : keys) {
    while (!impl_->TryGet(key)) {
      if (std::chrono::steady_clock::now() > deadline) {
        impl_->Fail("wait", "key " + key + " did not appear within " +
                                std::to_string(timeout.count()) + " ms (a peer is missing?)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }
}

}  // namespace easyscale

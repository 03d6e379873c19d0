// File: easyscale/common/rendezvous_store.h
//
// The key-value store through which a generation's workers meet (PUT/GET
// /v1/store of control_protocol.h), served by the operator per job and by
// `easyscale-worker local`'s runner. It is bounded and holds the keys of one
// generation at a time: keys must lie under the current prefix, and a new
// prefix drops the old keys, so stale or forged keys cannot pile up.
//   RendezvousStore store;
//   store.SetPrefix("gen-7-2f9c");
//   ES_RETURN_IF_ERROR(store.Put("gen-7-2f9c/0", address));
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "easyscale/common/http_server.h"
#include "easyscale/common/status.h"

namespace easyscale {

class RendezvousStore {
 public:
  struct Limits {
    size_t maxKeys = 1024;            // a generation's workers set a few keys each
    size_t maxValueBytes = 64 << 10;  // a Gloo address list is a few hundred bytes
  };
  RendezvousStore() = default;
  explicit RendezvousStore(Limits limits) : limits_(limits) {}

  // The generation whose keys the store holds; a different prefix drops the rest.
  void SetPrefix(const std::string& prefix);
  // FailedPrecondition: no prefix yet or the key is outside it (a stale
  // generation); ResourceExhausted: the value or the key count is over the limits.
  Status Put(const std::string& key, std::string value);
  // NotFound while the key is not there yet; FailedPrecondition for a key
  // outside the current prefix (it will never come: the caller is stale).
  StatusOr<std::string> Get(const std::string& key) const;
  size_t size() const;

 private:
  Status CheckPrefixLocked(const std::string& key) const;  // mu_ held

  Limits limits_;
  mutable std::mutex mu_;
  std::string prefix_;
  std::map<std::string, std::string> values_;
};

// Answers a PUT or GET /v1/store?key=K on `store` (the caller has checked who
// asks): 204 | 200 value | 404 not yet | 409 stale generation | 413 too big.
HttpResponse ServeRendezvousStore(const HttpRequest& request, RendezvousStore& store);

// A Status as an HTTP error answer, {"error": message}: 400 bad input, 401,
// 403, 404, 409 failed precondition, 413 resource exhausted, else 503.
HttpResponse ErrorResponse(const Status& s);

}  // namespace easyscale

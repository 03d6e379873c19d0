// File: operator/src/testing/wire_test.h
//
// The fixture of the test API server's wire tests (test-only): a server per
// test, raw HTTP calls that show what the server sent (no decompression),
// and checks of kube's Status answers.
//   Answer a = Call("POST", kPodsPath, PlainPod("a").dump());
//   ExpectStatus(a, 422, "Invalid");
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "test_apiserver.h"

namespace easyscale::op::testing {

inline const std::string kPodsPath = "/api/v1/namespaces/default/pods";
inline const std::string kJobsPath = "/apis/easyscale.io/v1alpha1/namespaces/default/easyscalejobs";

struct Answer {
  int status = 0;
  httplib::Headers headers;
  std::string body;
  // The body as JSON (discarded when it is not).
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
  // The body as watch events, one JSON object a line.
  std::vector<nlohmann::json> Events() const {
    std::vector<nlohmann::json> events;
    for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
      events.push_back(nlohmann::json::parse(line, nullptr, false));
    }
    return events;
  }
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class TestApiServerWireTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({.bookmarkIntervalMs = 100}); }

  void Start(const TestApiServerOptions& o) {
    auto s = TestApiServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  Answer Call(const std::string& method, const std::string& path, const std::string& body = "",
              const std::string& contentType = "application/json",
              const httplib::Headers& headers = {}) {
    httplib::Client http("127.0.0.1", server_->port());
    http.set_read_timeout(std::chrono::seconds(10));
    http.set_decompress(false);  // to see what the server sends
    httplib::Request req;
    req.method = method;
    req.path = path;
    req.headers = headers;
    req.body = body;
    if (!body.empty()) req.set_header("Content-Type", contentType);
    httplib::Result r = http.send(req);
    if (!r) return {};
    return {r->status, r->headers, r->body};
  }

  // Expects a kube Status object answer with `code` and `reason`.
  void ExpectStatus(const Answer& a, int code, const std::string& reason) {
    EXPECT_EQ(a.status, code) << a.body;
    const nlohmann::json s = a.Json();
    ASSERT_TRUE(s.is_object()) << a.body;
    EXPECT_EQ(s["kind"], "Status");
    EXPECT_EQ(s["code"], code);
    EXPECT_EQ(s["reason"], reason);
  }

  // The server still answers a plain list.
  void ExpectAlive() {
    const Answer a = Call("GET", "/api/v1/pods");
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a.Json()["kind"], "PodList");
  }

  std::unique_ptr<TestApiServer> server_;
};

}  // namespace easyscale::op::testing

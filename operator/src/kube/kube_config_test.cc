// In-cluster config and the reconnect backoff.
#include "easyscale/operator/kube_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "easyscale/common/file_io.h"
#include "easyscale/operator/backoff.h"

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;

TEST(InClusterConfig, ReadsServiceAccountAndServiceEnv) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sa_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic((dir / "token").string(), "tok\n").ok());
  ASSERT_TRUE(WriteFileAtomic((dir / "ca.crt").string(), "-----BEGIN CERTIFICATE-----\n").ok());
  ASSERT_TRUE(WriteFileAtomic((dir / "namespace").string(), "easyscale-system").ok());
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_FALSE(LoadInClusterConfig(dir.string()).ok());  // not in a pod
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  StatusOr<KubeConfig> c = LoadInClusterConfig(dir.string());
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:443");
  EXPECT_EQ(c->token, "tok");
  EXPECT_EQ(c->tokenFile, (dir / "token").string());  // read again as kubelet rotates it
  EXPECT_EQ(c->defaultNamespace, "easyscale-system");
  EXPECT_FALSE(c->caPem.empty());
}

TEST(Backoff, DoublesWithJitterUpToTheCapAndResets) {
  Backoff b(100ms, 400ms, 0.5);
  const auto d1 = b.Next();
  EXPECT_GE(d1, 100ms);
  EXPECT_LE(d1, 150ms);
  const auto d2 = b.Next();
  EXPECT_GE(d2, 200ms);
  EXPECT_LE(d2, 300ms);
  b.Next();
  const auto d4 = b.Next();
  EXPECT_GE(d4, 400ms);  // capped base
  EXPECT_LE(d4, 600ms);
  b.Reset();
  EXPECT_LE(b.Next(), 150ms);
}

}  // namespace
}  // namespace easyscale::op

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <exception>

#include "easyscale/common/checks.h"
#include "easyscale/worker/collective.h"
#include "http_store.h"

namespace easyscale {
namespace {

class SingleProcess : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllreduceSum(std::span<int64_t>) override { return absl::OkStatus(); }
  Status Barrier() override { return absl::OkStatus(); }
};

void SumInt64(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<int64_t*>(c);
  const auto* x = static_cast<const int64_t*>(a);
  const auto* y = static_cast<const int64_t*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

class GlooCollective : public Collective {
 public:
  GlooCollective(std::shared_ptr<gloo::Context> ctx, std::chrono::milliseconds timeout)
      : ctx_(std::move(ctx)), timeout_(timeout) {}
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }

  Status AllreduceSum(std::span<int64_t> data) override {
    try {
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(data.data(), data.size());
      opts.setReduceFunction(gloo::AllreduceOptions::Func(&SumInt64));
      opts.setTag(tag_++);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    } catch (const std::exception& e) {
      return absl::UnavailableError(std::string("allreduce failed (a peer is gone?): ") + e.what());
    }
    return absl::OkStatus();
  }

  Status Barrier() override {
    try {
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(tag_++);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    } catch (const std::exception& e) {
      return absl::UnavailableError(std::string("barrier failed (a peer is gone?): ") + e.what());
    }
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  std::chrono::milliseconds timeout_;
  uint32_t tag_ = 0;
};

// Builds rank `rank`'s full mesh through `store`; errors name `where`.
StatusOr<std::unique_ptr<Collective>> ConnectThrough(gloo::rendezvous::Store& store, int rank,
                                                     int size, const CollectiveOptions& opts,
                                                     const std::string& where) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of size ", size));
  }
  if (size == 1) return MakeSingleProcessCollective();
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = opts.bind_host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(opts.timeout);
    ctx->connectFullMesh(store, device);
    return std::unique_ptr<Collective>(std::make_unique<GlooCollective>(ctx, opts.timeout));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous ", where, " as rank ", rank, " of ", size, " failed: ", e.what()));
  }
}

}  // namespace

std::unique_ptr<Collective> MakeSingleProcessCollective() {
  return std::make_unique<SingleProcess>();
}

StatusOr<std::unique_ptr<Collective>> ConnectCollective(const Rendezvous& rv, int rank, int size,
                                                        const CollectiveOptions& opts) {
  if (size > 1 && rv.url.empty()) {
    return absl::InvalidArgumentError("rendezvous: no store url for " + std::to_string(size) +
                                      " workers");
  }
  HttpStore http(rv.url, opts.job, opts.token, opts.timeout);
  gloo::rendezvous::PrefixStore store(rv.prefix, http);
  return ConnectThrough(store, rank, size, opts, rv.url + " " + rv.prefix);
}

struct LocalRendezvous::Impl {
  gloo::rendezvous::HashStore store;
};

LocalRendezvous::LocalRendezvous() : impl_(std::make_unique<Impl>()) {}
LocalRendezvous::~LocalRendezvous() = default;

StatusOr<std::unique_ptr<Collective>> LocalRendezvous::Connect(int rank, int size,
                                                               const CollectiveOptions& opts) {
  return ConnectThrough(impl_->store, rank, size, opts, "in process");
}

#if !defined(EASYSCALE_WITH_NCCL)
StatusOr<std::unique_ptr<Collective>> UseDeviceCollective(std::unique_ptr<Collective> host, bool,
                                                          int) {
  return host;
}
#endif

}  // namespace easyscale

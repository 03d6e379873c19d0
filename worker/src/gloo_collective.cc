#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <exception>

#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/worker/collective.h"

namespace easyscale {
namespace {

class SingleProcess : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllreduceSum(std::vector<int64_t>&) override { return absl::OkStatus(); }
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

  Status AllreduceSum(std::vector<int64_t>& data) override {
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

}  // namespace

std::unique_ptr<Collective> MakeSingleProcessCollective() {
  return std::make_unique<SingleProcess>();
}

StatusOr<std::unique_ptr<Collective>> ConnectCollective(const Rendezvous& rv, int rank, int size,
                                                        const CollectiveOptions& opts) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of size ", size));
  }
  if (size == 1) return MakeSingleProcessCollective();
  if (rv.store != "file") {
    return absl::UnimplementedError("rendezvous store \"" + rv.store + "\" (only \"file\")");
  }
  ES_RETURN_IF_ERROR(MakeDirs(rv.path));
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = opts.bind_host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(rv.path);
    gloo::rendezvous::PrefixStore store(rv.prefix, file_store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(opts.timeout);
    ctx->connectFullMesh(store, device);
    return std::unique_ptr<Collective>(std::make_unique<GlooCollective>(ctx, opts.timeout));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rendezvous ", rv.path, "/", rv.prefix, " as rank ",
                                               rank, " of ", size, " failed: ", e.what()));
  }
}

#if !defined(EASYSCALE_WITH_NCCL)
StatusOr<std::unique_ptr<Collective>> UseDeviceCollective(std::unique_ptr<Collective> host, bool,
                                                          int) {
  return host;
}
#endif

}  // namespace easyscale

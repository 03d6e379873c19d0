#include "easyscale/worker/backend.h"

#include <cstring>

#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/fixed_point.h"

namespace easyscale {
namespace {

class CpuBackend : public KernelBackend {
 public:
  std::string Name() const override { return "cpu"; }
  void Wait() override {}
  void Copy(size_t bytes, const void* src, void* dst) override {
    if (bytes > 0 && src != dst) std::memmove(dst, src, bytes);
  }
  void Zero(size_t bytes, void* dst) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
  }
  void SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                           float* dlogits, float* loss) override {
    *loss = cpu::SoftmaxCrossEntropy(rows, classes, logits, labels, dlogits);
  }
  void AccumulateFixedPoint(std::span<const float* const> segments, std::span<const size_t> sizes,
                            int64_t max_terms, int64_t* acc, int32_t* nonfinite) override {
    for (size_t first = 0; first < segments.size(); first += sizes.size()) {
      int64_t* sums = acc;
      for (size_t s = 0; s < sizes.size(); ++s) {
        if (!easyscale::AccumulateFixedPoint(segments[first + s], sizes[s], max_terms, sums))
          nonfinite[first + s] = 1;
        sums += sizes[s];
      }
    }
  }
  void AddFixedPointSums(size_t n, const int64_t* src, int64_t* dst) override {
    for (size_t i = 0; i < n; ++i) dst[i] += src[i];
  }
  void Argmax(int rows, int classes, const float* logits, int32_t* out) override {
    cpu::Argmax(rows, classes, logits, out);
  }
  // The means decoded into grad first (a loop that vectorises), then the rule.
  void UpdateParams(const formulas::UpdateRule& rule,
                    std::span<const formulas::ParamPart> parts) override {
    for (const formulas::ParamPart& p : parts) {
      if (rule.mean_of > 0) easyscale::DecodeFixedPointMean(p.sums, p.n, rule.mean_of, p.grad);
      if (rule.adam) {
        for (size_t i = 0; i < p.n; ++i)
          formulas::AdamUpdate(rule, p.grad[i], &p.value[i], &p.state1[i], &p.state2[i]);
      } else {
        for (size_t i = 0; i < p.n; ++i)
          formulas::SgdUpdate(rule, p.grad[i], &p.value[i], &p.state1[i]);
      }
    }
  }

 protected:
  void* AddressOf(void* host, size_t, DeviceMirror&) override { return host; }
  void CopyToDevice(const void*, size_t, DeviceMirror&) override {}
  void CopyToHost(void*, size_t, DeviceMirror&, size_t) override {}
};

}  // namespace

KernelBackend& CpuKernelBackend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace easyscale

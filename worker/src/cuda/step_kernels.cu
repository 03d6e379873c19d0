// Kernels of the training step around the model: the exact aggregation's
// fixed-point accumulation (fixed_point.h's FixedPointTerm, so the same
// integers) and the parameter update (the CPU backend's twin in backend.cc, both
// from fixed_point.h and kernel_formulas.h).
#include "cuda_kernels.h"
#include "easyscale/worker/fixed_point.h"
#include "launch.cuh"

namespace easyscale::cuda {
namespace {

struct Segments {
  const float* data[kMaxFixedPointSources][kMaxFixedPointSegments];
  size_t size[kMaxFixedPointSegments];
  size_t offset[kMaxFixedPointSegments];
};
static_assert(sizeof(Segments) < 4000, "a kernel parameter");

// blockIdx.y is the segment; the x blocks stride over its elements, each
// adding every source's term (integers: the order changes nothing).
__global__ void AccumulateFixedPointKernel(Segments s, int sources, double limit, int64_t* acc,
                                           int32_t* nonfinite, size_t nonfinite_stride) {
  const int seg = blockIdx.y;
  int64_t* out = acc + s.offset[seg];
  unsigned bad = 0;  // bit j: source j
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < s.size[seg];
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    int64_t terms = 0;
    for (int j = 0; j < sources; ++j) {
      const float v = s.data[j][seg][i];
      bad |= static_cast<unsigned>(!(fabsf(v) <= 3.40282347e38f)) << j;
      terms += FixedPointTerm(v, limit);
    }
    out[i] += terms;
  }
  for (int j = 0; j < sources; ++j) {
    if (bad >> j & 1u) nonfinite[j * nonfinite_stride + seg] = 1;  // every writer writes 1
  }
}

}  // namespace

cudaError_t AccumulateFixedPoint(int count, int sources, const float* const* segments,
                                 const size_t* sizes, int64_t max_terms, int64_t* acc,
                                 int32_t* nonfinite, size_t nonfinite_stride, cudaStream_t stream) {
  if (count < 0 || count > kMaxFixedPointSegments || sources < 0 ||
      sources > kMaxFixedPointSources) {
    return cudaErrorInvalidValue;
  }
  if (count == 0 || sources == 0) return cudaSuccess;
  Segments s{};
  size_t offset = 0, largest = 0;
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < sources; ++j) s.data[j][i] = segments[j * count + i];
    s.size[i] = sizes[i];
    s.offset[i] = offset;
    offset += sizes[i];
    largest = sizes[i] > largest ? sizes[i] : largest;
  }
  const size_t wanted = (largest + kBlockThreads - 1) / kBlockThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? (wanted > 0 ? wanted : 1) : 4096);
  AccumulateFixedPointKernel<<<dim3(blocks, static_cast<unsigned>(count)), kBlockThreads, 0,
                               stream>>>(s, sources, FixedPointLimit(max_terms), acc, nonfinite,
                                         nonfinite_stride);
  return cudaGetLastError();
}

cudaError_t AddFixedPointSums(size_t n, const int64_t* src, int64_t* dst, cudaStream_t stream) {
  return LaunchForEach(n, stream, [=] __device__(size_t i) { dst[i] += src[i]; });
}

cudaError_t DecodeFixedPointMean(size_t n, const int64_t* sums, int terms, float* out,
                                 cudaStream_t stream) {
  return LaunchForEach(n, stream,
                       [=] __device__(size_t i) { out[i] = FixedPointMean(sums[i], terms); });
}

cudaError_t UpdateParams(const formulas::UpdateRule& rule, size_t n, const float* grad,
                         float* value, float* state1, float* state2, cudaStream_t stream) {
  if (rule.adam) {
    return LaunchForEach(n, stream, [=] __device__(size_t i) {
      formulas::AdamUpdate(rule, grad[i], &value[i], &state1[i], &state2[i]);
    });
  }
  return LaunchForEach(n, stream, [=] __device__(size_t i) {
    formulas::SgdUpdate(rule, grad[i], &value[i], &state1[i]);
  });
}

}  // namespace easyscale::cuda

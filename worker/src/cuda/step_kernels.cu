// Kernels of the training step around the model: the exact aggregation's
// fixed-point accumulation (fixed_point.h's FixedPointTerm, so the same
// integers) and the parameter update (the CPU backend's twin in backend.cc, both
// from fixed_point.h and kernel_formulas.h).
#include "cuda_kernels.h"
#include "easyscale/worker/fixed_point.h"
#include "launch.cuh"

namespace easyscale::cuda {
namespace {

// A launch over parts of different sizes (a step's parameters): a block
// runs kPartBlockElements consecutive elements of one part, part p's blocks
// first[p] ... first[p + 1] - 1 (none for an empty part), so no block idles
// (a grid as long as the largest part for every part, most of it empty,
// accumulated the encoder's gradients in 1.22 ms on an H100, about 1.7 times
// their bytes' time: ncu, run 26).
constexpr size_t kPartBlockElements = 4 * kBlockThreads;

// First blocks of `count` parts of `sizes` elements into first[0 .. count];
// false when the blocks overflow a grid.
template <typename Size>
bool FirstBlocks(int count, Size size, unsigned* first) {
  size_t blocks = 0;
  for (int p = 0; p < count; ++p) {
    first[p] = static_cast<unsigned>(blocks);
    blocks += (size(p) + kPartBlockElements - 1) / kPartBlockElements;
    if (blocks > 0x7fffffff) return false;
  }
  first[count] = static_cast<unsigned>(blocks);
  return true;
}

// This block's part: the last whose first block is at most this one (an
// empty part's first block is its successor's).
__device__ int PartOfBlock(const unsigned* first, int count) {
  const unsigned block = blockIdx.x;
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

struct Segments {
  const float* data[kMaxFixedPointSources][kMaxFixedPointSegments];
  size_t size[kMaxFixedPointSegments];
  size_t offset[kMaxFixedPointSegments];
  unsigned first[kMaxFixedPointSegments + 1];
  int count;
};
static_assert(sizeof(Segments) < 4000, "a kernel parameter");

// Each element adds every source's term (integers: the order changes nothing).
__global__ void __launch_bounds__(kBlockThreads)
    AccumulateFixedPointKernel(const __grid_constant__ Segments s, int sources, double limit,
                               int64_t* acc, int32_t* nonfinite, size_t nonfinite_stride) {
  const int seg = PartOfBlock(s.first, s.count);
  const size_t begin = static_cast<size_t>(blockIdx.x - s.first[seg]) * kPartBlockElements;
  const size_t end = min(begin + kPartBlockElements, s.size[seg]);
  int64_t* out = acc + s.offset[seg];
  unsigned bad = 0;  // bit j: source j
  for (size_t i = begin + threadIdx.x; i < end; i += kBlockThreads) {
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

// One launch's parts (up to kMaxParamParts) and the first block of each.
struct PartLaunch {
  formulas::ParamPart part[kMaxParamParts];
  unsigned first[kMaxParamParts + 1];
  int count;
};
static_assert(sizeof(PartLaunch) < 4000, "a kernel parameter");

template <typename F>
__global__ void __launch_bounds__(kBlockThreads)
    ForEachPartKernel(const __grid_constant__ PartLaunch launch, F f) {
  const int p = PartOfBlock(launch.first, launch.count);
  const formulas::ParamPart& part = launch.part[p];
  const size_t begin = static_cast<size_t>(blockIdx.x - launch.first[p]) * kPartBlockElements;
  const size_t end = min(begin + kPartBlockElements, part.n);
  for (size_t i = begin + threadIdx.x; i < end; i += kBlockThreads) f(part, i);
}

// f(part, i) for every element i of each of the `count` parts, in launches of
// up to kMaxParamParts parts.
template <typename F>
cudaError_t LaunchForEachPart(const formulas::ParamPart* parts, size_t count, cudaStream_t stream,
                              F f) {
  for (size_t first = 0; first < count; first += kMaxParamParts) {
    PartLaunch launch{};
    launch.count =
        static_cast<int>(count - first < kMaxParamParts ? count - first : kMaxParamParts);
    for (int p = 0; p < launch.count; ++p) launch.part[p] = parts[first + p];
    if (!FirstBlocks(
            launch.count, [&](int p) { return launch.part[p].n; }, launch.first))
      return cudaErrorInvalidValue;
    const unsigned blocks = launch.first[launch.count];
    if (blocks == 0) continue;
    ForEachPartKernel<<<blocks, kBlockThreads, 0, stream>>>(launch, f);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  return cudaSuccess;
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
  s.count = count;
  size_t offset = 0;
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < sources; ++j) s.data[j][i] = segments[j * count + i];
    s.size[i] = sizes[i];
    s.offset[i] = offset;
    offset += sizes[i];
  }
  if (!FirstBlocks(
          count, [&](int i) { return s.size[i]; }, s.first))
    return cudaErrorInvalidValue;
  const unsigned blocks = s.first[count];
  if (blocks == 0) return cudaSuccess;
  AccumulateFixedPointKernel<<<blocks, kBlockThreads, 0, stream>>>(
      s, sources, FixedPointLimit(max_terms), acc, nonfinite, nonfinite_stride);
  return cudaGetLastError();
}

cudaError_t AddFixedPointSums(size_t n, const int64_t* src, int64_t* dst, cudaStream_t stream) {
  return LaunchForEach(n, stream, [=] __device__(size_t i) { dst[i] += src[i]; });
}

cudaError_t UpdateParams(const formulas::UpdateRule& rule, const formulas::ParamPart* parts,
                         size_t count, cudaStream_t stream) {
  if (rule.adam) {
    return LaunchForEachPart(parts, count, stream,
                             [=] __device__(const formulas::ParamPart& p, size_t i) {
                               formulas::AdamUpdate(rule, formulas::StepGradient(rule, p, i),
                                                    &p.value[i], &p.state1[i], &p.state2[i]);
                             });
  }
  return LaunchForEachPart(
      parts, count, stream, [=] __device__(const formulas::ParamPart& p, size_t i) {
        formulas::SgdUpdate(rule, formulas::StepGradient(rule, p, i), &p.value[i], &p.state1[i]);
      });
}

}  // namespace easyscale::cuda

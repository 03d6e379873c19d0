// The strided-view ops' CUDA kernel (layout_util.h's StridedViewOp:
// Transpose, Slice): one thread per view element, which only moves it. The
// element's multi-index takes a division per dimension; in 32 bits where
// every index and offset fits (the encoder's attention transposes: 3.1 M
// elements), since a 64-bit division is a long emulated sequence on a GPU and
// made these copies bound by index arithmetic, not memory.
#include <cstdint>
#include <limits>

#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

// The view's dimensions and steps in the index types Copy runs.
template <typename Unsigned, typename Signed>
struct View {
  int rank;
  Unsigned out[kMaxRank];
  Signed steps[kMaxRank];
  Signed offset;
};

template <typename Unsigned, typename Signed, typename T>
cudaError_t Copy(const BroadcastDims& view, int64_t offset, size_t n, bool scatter, const T* src,
                 T* dst, cudaStream_t stream) {
  View<Unsigned, Signed> v{view.rank, {}, {}, static_cast<Signed>(offset)};
  for (int d = 0; d < view.rank; ++d) {
    v.out[d] = static_cast<Unsigned>(view.out[d]);
    v.steps[d] = static_cast<Signed>(view.steps[0][d]);
  }
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t e) {
    Unsigned rest = static_cast<Unsigned>(e);
    Signed at = v.offset;
    for (int d = v.rank; d-- > 0;) {
      const Unsigned next = rest / v.out[d];
      at += static_cast<Signed>(rest - next * v.out[d]) * v.steps[d];
      rest = next;
    }
    if (scatter) {
      dst[at] = src[e];
    } else {
      dst[e] = src[at];
    }
  });
}

// Whether every element index of the view (n of them) and every strided
// offset it reaches fit 32 bits: each partial sum of an offset lies between
// the lowest and highest it can reach (>= 0 for a valid view), and each
// term is at most their distance.
bool Fits32(const BroadcastDims& view, int64_t offset, size_t n) {
  int64_t lo = offset, hi = offset;
  for (int d = 0; d < view.rank; ++d) {
    const int64_t span = (view.out[d] - 1) * view.steps[0][d];
    (span < 0 ? lo : hi) += span;
  }
  return n <= std::numeric_limits<uint32_t>::max() && lo >= 0 &&
         hi <= std::numeric_limits<int32_t>::max();
}

template <typename T>
cudaError_t CopyOf(const BroadcastDims& view, int64_t offset, bool scatter, const T* src, T* dst,
                   cudaStream_t stream) {
  size_t n = 1;
  for (int d = 0; d < view.rank; ++d) n *= static_cast<size_t>(view.out[d]);
  if (n == 0) return cudaSuccess;
  if (Fits32(view, offset, n))
    return Copy<uint32_t, int32_t>(view, offset, n, scatter, src, dst, stream);
  return Copy<uint64_t, int64_t>(view, offset, n, scatter, src, dst, stream);
}

}  // namespace

cudaError_t StridedCopy(const BroadcastDims& view, int64_t offset, size_t element_bytes,
                        bool scatter, const void* src, void* dst, cudaStream_t stream) {
  if (element_bytes == sizeof(int64_t)) {
    return CopyOf(view, offset, scatter, static_cast<const int64_t*>(src),
                  static_cast<int64_t*>(dst), stream);
  }
  return CopyOf(view, offset, scatter, static_cast<const float*>(src), static_cast<float*>(dst),
                stream);
}

}  // namespace easyscale::graph::cuda_ops

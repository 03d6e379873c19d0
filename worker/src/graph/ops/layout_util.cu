// The strided-view ops' CUDA kernel (layout_util.h's StridedViewOp:
// Transpose, Slice): one thread per view element, which only moves it.
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

template <typename T>
cudaError_t Copy(const BroadcastDims& view, int64_t offset, bool scatter, const T* src, T* dst,
                 cudaStream_t stream) {
  size_t n = 1;
  for (int d = 0; d < view.rank; ++d) n *= static_cast<size_t>(view.out[d]);
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t e) {
    int64_t rest = static_cast<int64_t>(e), at = offset;
    for (int d = view.rank; d-- > 0;) {
      at += rest % view.out[d] * view.steps[0][d];
      rest /= view.out[d];
    }
    if (scatter) {
      dst[at] = src[e];
    } else {
      dst[e] = src[at];
    }
  });
}

}  // namespace

cudaError_t StridedCopy(const BroadcastDims& view, int64_t offset, size_t element_bytes,
                        bool scatter, const void* src, void* dst, cudaStream_t stream) {
  if (element_bytes == sizeof(int64_t)) {
    return Copy(view, offset, scatter, static_cast<const int64_t*>(src), static_cast<int64_t*>(dst),
                stream);
  }
  return Copy(view, offset, scatter, static_cast<const float*>(src), static_cast<float*>(dst),
              stream);
}

}  // namespace easyscale::graph::cuda_ops

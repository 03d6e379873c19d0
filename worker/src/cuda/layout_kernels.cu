// Data movement and element-wise kernels: one thread per output, each output
// computed exactly as the CPU loop computes it (cpu_kernels.cc).
#include "cuda_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "easyscale/worker/philox.h"
#include "launch.cuh"

namespace easyscale::cuda {

cudaError_t Transpose(int rows, int cols, const float* src, float* dst, cudaStream_t stream) {
  return LaunchForEach(static_cast<size_t>(rows) * cols, stream, [=] __device__(size_t i) {
    const size_t r = i / cols, c = i % cols;
    dst[c * rows + r] = src[i];
  });
}

cudaError_t Im2Col(int B, int C, int H, int W, int KH, int KW, const float* x, float* cols,
                   cudaStream_t stream) {
  const int OH = H - KH + 1, OW = W - KW + 1;
  const size_t ncols = static_cast<size_t>(B) * OH * OW;
  return LaunchForEach(static_cast<size_t>(C) * KH * KW * ncols, stream, [=] __device__(size_t i) {
    const size_t row = i / ncols, col = i % ncols;
    const int kx = static_cast<int>(row % KW), ky = static_cast<int>(row / KW % KH);
    const int c = static_cast<int>(row / (static_cast<size_t>(KW) * KH));
    const int ox = static_cast<int>(col % OW), oy = static_cast<int>(col / OW % OH);
    const size_t b = col / (static_cast<size_t>(OW) * OH);
    cols[i] = x[((b * C + c) * H + oy + ky) * W + ox + kx];
  });
}

cudaError_t Col2Im(int B, int C, int H, int W, int KH, int KW, const float* cols, float* dx,
                   cudaStream_t stream) {
  const int OH = H - KH + 1, OW = W - KW + 1;
  const size_t ncols = static_cast<size_t>(B) * OH * OW;
  // The CPU adds in row-major order of cols; for one dx element that is (ky, kx) ascending.
  return LaunchForEach(static_cast<size_t>(B) * C * H * W, stream, [=] __device__(size_t i) {
    const int xx = static_cast<int>(i % W), yy = static_cast<int>(i / W % H);
    const int c = static_cast<int>(i / (static_cast<size_t>(W) * H) % C);
    const size_t b = i / (static_cast<size_t>(W) * H * C);
    float s = 0.0f;
    for (int ky = 0; ky < KH; ++ky) {
      const int oy = yy - ky;
      if (oy < 0 || oy >= OH) continue;
      for (int kx = 0; kx < KW; ++kx) {
        const int ox = xx - kx;
        if (ox < 0 || ox >= OW) continue;
        s += cols[(static_cast<size_t>(c * KH + ky) * KW + kx) * ncols + (b * OH + oy) * OW + ox];
      }
    }
    dx[i] = s;
  });
}

cudaError_t ChannelMajorToNchw(int B, int C, int P, const float* x, const float* bias, float* y,
                               cudaStream_t stream) {
  return LaunchForEach(static_cast<size_t>(B) * C * P, stream, [=] __device__(size_t i) {
    const size_t p = i % P, c = i / P % C, b = i / (static_cast<size_t>(P) * C);
    y[i] = x[(c * B + b) * P + p] + (bias ? bias[c] : 0.0f);
  });
}

cudaError_t NchwToChannelMajor(int B, int C, int P, const float* x, float* y, cudaStream_t stream) {
  return LaunchForEach(static_cast<size_t>(B) * C * P, stream, [=] __device__(size_t i) {
    const size_t p = i % P, c = i / P % C, b = i / (static_cast<size_t>(P) * C);
    y[(c * B + b) * P + p] = x[i];
  });
}

cudaError_t AddRowBias(int rows, int cols, const float* bias, float* out, cudaStream_t stream) {
  return LaunchForEach(static_cast<size_t>(rows) * cols, stream,
                       [=] __device__(size_t i) { out[i] += bias[i % cols]; });
}

cudaError_t Relu(size_t n, const float* x, float* y, cudaStream_t stream) {
  return LaunchForEach(n, stream, [=] __device__(size_t i) { y[i] = x[i] > 0.0f ? x[i] : 0.0f; });
}

cudaError_t ReluBackward(size_t n, const float* y, const float* dy, float* dx,
                         cudaStream_t stream) {
  return LaunchForEach(n, stream, [=] __device__(size_t i) { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; });
}

cudaError_t MaxPool2(int B, int C, int H, int W, const float* x, float* y, int32_t* argmax,
                     cudaStream_t stream) {
  const int OH = H / 2, OW = W / 2;
  return LaunchForEach(static_cast<size_t>(B) * C * OH * OW, stream, [=] __device__(size_t o) {
    const int ox = static_cast<int>(o % OW), oy = static_cast<int>(o / OW % OH);
    const float* img = x + o / (static_cast<size_t>(OW) * OH) * H * W;
    int best = (2 * oy) * W + 2 * ox;
    for (int d = 1; d < 4; ++d) {
      const int idx = (2 * oy + d / 2) * W + 2 * ox + d % 2;
      if (img[idx] > img[best]) best = idx;
    }
    y[o] = img[best];
    argmax[o] = best;
  });
}

cudaError_t MaxPool2Backward(int B, int C, int H, int W, const float* dy, const int32_t* argmax,
                             float* dx, cudaStream_t stream) {
  const int OH = H / 2, OW = W / 2;
  // Gather form of the CPU's scatter: each input position takes dy when it is
  // its window's argmax (windows never overlap), else 0.
  return LaunchForEach(static_cast<size_t>(B) * C * H * W, stream, [=] __device__(size_t i) {
    const int xx = static_cast<int>(i % W), yy = static_cast<int>(i / W % H);
    const size_t bc = i / (static_cast<size_t>(W) * H);
    float v = 0.0f;
    if (yy / 2 < OH && xx / 2 < OW) {
      const size_t o = (bc * OH + yy / 2) * OW + xx / 2;
      if (argmax[o] == yy * W + xx) v = dy[o];
    }
    dx[i] = v;
  });
}

cudaError_t AvgPool2(int B, int C, int H, int W, const float* x, float* y, cudaStream_t stream) {
  const int OH = H / 2, OW = W / 2;
  return LaunchForEach(static_cast<size_t>(B) * C * OH * OW, stream, [=] __device__(size_t o) {
    const int ox = static_cast<int>(o % OW), oy = static_cast<int>(o / OW % OH);
    const float* p = x + o / (static_cast<size_t>(OW) * OH) * H * W + (2 * oy) * W + 2 * ox;
    y[o] = (((p[0] + p[1]) + p[W]) + p[W + 1]) * 0.25f;
  });
}

cudaError_t AvgPool2Backward(int B, int C, int H, int W, const float* dy, float* dx,
                             cudaStream_t stream) {
  const int OH = H / 2, OW = W / 2;
  return LaunchForEach(static_cast<size_t>(B) * C * H * W, stream, [=] __device__(size_t i) {
    const int xx = static_cast<int>(i % W), yy = static_cast<int>(i / W % H);
    const size_t bc = i / (static_cast<size_t>(W) * H);
    dx[i] = dy[(bc * OH + yy / 2) * OW + xx / 2] * 0.25f;
  });
}

namespace {

// `counter()` yields the stream's first Philox counter, from an argument or from
// device memory (where a replayed CUDA graph finds each step's value).
template <typename Counter>
cudaError_t LaunchDropout(size_t n, float p, uint32_t key0, uint32_t key1, Counter counter,
                          const float* x, float* y, float* mask, cudaStream_t stream) {
  const float scale = 1.0f / (1.0f - p);
  // One thread per Philox block of four elements.
  return LaunchForEach((n + 3) / 4, stream, [=] __device__(size_t g) {
    uint32_t bits[4];
    Philox4x32({key0, key1}, counter() + g, 0, bits);
    for (int lane = 0; lane < 4; ++lane) {
      const size_t i = 4 * g + lane;
      if (i >= n) break;
      const float m = formulas::DropoutMask(bits[lane], p, scale);
      mask[i] = m;
      y[i] = x[i] * m;
    }
  });
}

}  // namespace

cudaError_t Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base,
                    const float* x, float* y, float* mask, cudaStream_t stream) {
  return LaunchDropout(
      n, p, key0, key1, [=] __device__() { return counter_base; }, x, y, mask, stream);
}

cudaError_t DropoutCounterAt(size_t n, float p, uint32_t key0, uint32_t key1,
                             const uint64_t* counter_base, const float* x, float* y, float* mask,
                             cudaStream_t stream) {
  return LaunchDropout(
      n, p, key0, key1, [=] __device__() { return *counter_base; }, x, y, mask, stream);
}

cudaError_t Mul(size_t n, const float* a, const float* b, float* out, cudaStream_t stream) {
  return LaunchForEach(n, stream, [=] __device__(size_t i) { out[i] = a[i] * b[i]; });
}

cudaError_t Add(size_t n, const float* a, const float* b, float* out, cudaStream_t stream) {
  return LaunchForEach(n, stream, [=] __device__(size_t i) { out[i] = a[i] + b[i]; });
}

}  // namespace easyscale::cuda

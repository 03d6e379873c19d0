#include "easyscale/worker/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "easyscale/worker/detmath.h"
#include "easyscale/worker/kernel_formulas.h"
#include "easyscale/worker/philox.h"

namespace easyscale::cpu {

using detmath::Fma;

namespace {

// A channel's sums in the two-level order of cpu_kernels.h: per sample, a chain
// of fold(a, b, part) over the positions from 0, then the samples' results in
// sample order from 0 (the CUDA ChannelSums runs the same, a thread a sample).
// b may be null (one input).
template <int NSum, typename Fold>
void ChannelSums(int B, int C, int P, int c, const float* a, const float* b, Fold fold,
                 float (&total)[NSum]) {
  for (float& t : total) t = 0.0f;
  for (int sample = 0; sample < B; ++sample) {
    const size_t row = (static_cast<size_t>(sample) * C + c) * P;
    const float* ra = a + row;
    const float* rb = b != nullptr ? b + row : ra;
    float part[NSum] = {};
    for (int p = 0; p < P; ++p) fold(ra[p], rb[p], part);
    for (int s = 0; s < NSum; ++s) total[s] += part[s];
  }
}

}  // namespace

void Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
          bool accumulate) {
  // Loop order i, k, j: every C[i,j] still sees each k block ascending, and the
  // inner loop runs over contiguous j, which vectorises without changing any
  // element's order. Blocks after the first chain into `part`, then add.
  constexpr int kBlockN = 256;
  float part[kBlockN];
  // c[0..n) += the chain over k in [k0, k1) of a[k] * B[k, j0..j0+n).
  auto chain = [&](const float* a, int k0, int k1, int j0, int n, float* __restrict c) {
    for (int k = k0; k < k1; ++k) {
      const float aik = a[k];
      const float* __restrict b = B + static_cast<size_t>(k) * ldb + j0;
      for (int j = 0; j < n; ++j) c[j] = Fma(aik, b[j], c[j]);
    }
  };
  for (int j0 = 0; j0 < N; j0 += kBlockN) {
    const int n = std::min(N - j0, kBlockN);
    for (int i = 0; i < M; ++i) {
      float* __restrict c = C + static_cast<size_t>(i) * ldc + j0;
      if (!accumulate) std::fill(c, c + n, 0.0f);
      const float* a = A + static_cast<size_t>(i) * lda;
      chain(a, 0, std::min(K, formulas::kGemmKBlock), j0, n, c);
      for (int k0 = formulas::kGemmKBlock; k0 < K; k0 += formulas::kGemmKBlock) {
        std::fill(part, part + n, 0.0f);
        chain(a, k0, std::min(K, k0 + formulas::kGemmKBlock), j0, n, part);
        for (int j = 0; j < n; ++j) c[j] += part[j];
      }
    }
  }
}

void Transpose(int rows, int cols, const float* src, float* dst) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c)
      dst[static_cast<size_t>(c) * rows + r] = src[static_cast<size_t>(r) * cols + c];
  }
}

void Im2Col(int B, int C, int H, int W, int KH, int KW, const float* x, float* cols) {
  const int OH = H - KH + 1, OW = W - KW + 1;
  const size_t ncols = static_cast<size_t>(B) * OH * OW;
  for (int c = 0; c < C; ++c) {
    for (int ky = 0; ky < KH; ++ky) {
      for (int kx = 0; kx < KW; ++kx) {
        float* row = cols + (static_cast<size_t>(c * KH + ky) * KW + kx) * ncols;
        for (int b = 0; b < B; ++b) {
          const float* img = x + (static_cast<size_t>(b) * C + c) * H * W;
          for (int oy = 0; oy < OH; ++oy) {
            std::memcpy(row, img + static_cast<size_t>(oy + ky) * W + kx, sizeof(float) * OW);
            row += OW;
          }
        }
      }
    }
  }
}

void Col2Im(int B, int C, int H, int W, int KH, int KW, const float* cols, float* dx) {
  const int OH = H - KH + 1, OW = W - KW + 1;
  std::fill(dx, dx + static_cast<size_t>(B) * C * H * W, 0.0f);
  for (int c = 0; c < C; ++c) {
    for (int ky = 0; ky < KH; ++ky) {
      for (int kx = 0; kx < KW; ++kx) {
        const float* row = cols + (static_cast<size_t>(c * KH + ky) * KW + kx) * B * OH * OW;
        for (int b = 0; b < B; ++b) {
          float* img = dx + (static_cast<size_t>(b) * C + c) * H * W;
          for (int oy = 0; oy < OH; ++oy) {
            float* out = img + static_cast<size_t>(oy + ky) * W + kx;
            for (int ox = 0; ox < OW; ++ox) out[ox] += row[ox];
            row += OW;
          }
        }
      }
    }
  }
}

void Im2ColImage(const ConvGeometry& g, const float* x, float* cols) {
  const size_t P = static_cast<size_t>(g.OH) * g.OW;
  for (int c = 0; c < g.C; ++c) {
    const float* img = x + static_cast<size_t>(c) * g.H * g.W;
    for (int ky = 0; ky < g.KH; ++ky) {
      for (int kx = 0; kx < g.KW; ++kx) {
        float* row = cols + (static_cast<size_t>(c * g.KH + ky) * g.KW + kx) * P;
        const int x0 = kx * g.DW - g.PL;
        for (int oy = 0; oy < g.OH; ++oy, row += g.OW) {
          const int iy = oy * g.SH - g.PT + ky * g.DH;
          if (iy < 0 || iy >= g.H) {
            std::fill(row, row + g.OW, 0.0f);
            continue;
          }
          const float* src = img + static_cast<size_t>(iy) * g.W;
          if (g.SW == 1 && x0 >= 0 && x0 + g.OW <= g.W) {
            std::memcpy(row, src + x0, sizeof(float) * g.OW);
            continue;
          }
          for (int ox = 0; ox < g.OW; ++ox) {
            const int ix = ox * g.SW + x0;
            row[ox] = ix >= 0 && ix < g.W ? src[ix] : 0.0f;
          }
        }
      }
    }
  }
}

void Col2ImImage(const ConvGeometry& g, const float* cols, float* dx) {
  std::fill(dx, dx + static_cast<size_t>(g.C) * g.H * g.W, 0.0f);
  for (int c = 0; c < g.C; ++c) {
    float* img = dx + static_cast<size_t>(c) * g.H * g.W;
    for (int ky = 0; ky < g.KH; ++ky) {
      for (int kx = 0; kx < g.KW; ++kx) {
        const float* row = cols + (static_cast<size_t>(c * g.KH + ky) * g.KW + kx) * g.OH * g.OW;
        const int x0 = kx * g.DW - g.PL;
        for (int oy = 0; oy < g.OH; ++oy, row += g.OW) {
          const int iy = oy * g.SH - g.PT + ky * g.DH;
          if (iy < 0 || iy >= g.H) continue;
          float* dst = img + static_cast<size_t>(iy) * g.W;
          for (int ox = 0; ox < g.OW; ++ox) {
            const int ix = ox * g.SW + x0;
            if (ix >= 0 && ix < g.W) dst[ix] += row[ox];
          }
        }
      }
    }
  }
}

void ChannelMajorToNchw(int B, int C, int P, const float* x, const float* bias, float* y) {
  for (int b = 0; b < B; ++b) {
    for (int c = 0; c < C; ++c) {
      const float* src = x + (static_cast<size_t>(c) * B + b) * P;
      float* dst = y + (static_cast<size_t>(b) * C + c) * P;
      const float bc = bias ? bias[c] : 0.0f;
      for (int p = 0; p < P; ++p) dst[p] = src[p] + bc;
    }
  }
}

void NchwToChannelMajor(int B, int C, int P, const float* x, float* y) {
  for (int b = 0; b < B; ++b) {
    for (int c = 0; c < C; ++c) {
      std::memcpy(y + (static_cast<size_t>(c) * B + b) * P,
                  x + (static_cast<size_t>(b) * C + c) * P, sizeof(float) * P);
    }
  }
}

void ChannelSum(int B, int C, int P, const float* dy, float* bias_grad) {
  for (int c = 0; c < C; ++c) {
    float s[1];
    ChannelSums(
        B, C, P, c, dy, nullptr, [](float v, float, float(&part)[1]) { part[0] += v; }, s);
    bias_grad[c] = s[0];
  }
}

void AddRowBias(int rows, int cols, const float* bias, float* out) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) out[static_cast<size_t>(r) * cols + c] += bias[c];
  }
}

void ColumnSum(int rows, int cols, const float* dy, float* grad) {
  std::fill(grad, grad + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) grad[c] += dy[static_cast<size_t>(r) * cols + c];
  }
}

void Relu(size_t n, const float* x, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ReluBackward(size_t n, const float* y, const float* dy, float* dx) {
  for (size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void MaxPool2(int B, int C, int H, int W, const float* x, float* y, int32_t* argmax) {
  const int OH = H / 2, OW = W / 2;
  for (int bc = 0; bc < B * C; ++bc) {
    const float* img = x + static_cast<size_t>(bc) * H * W;
    for (int oy = 0; oy < OH; ++oy) {
      for (int ox = 0; ox < OW; ++ox) {
        int best = (2 * oy) * W + 2 * ox;
        for (int d = 1; d < 4; ++d) {
          const int idx = (2 * oy + d / 2) * W + 2 * ox + d % 2;
          if (img[idx] > img[best]) best = idx;
        }
        const size_t o = (static_cast<size_t>(bc) * OH + oy) * OW + ox;
        y[o] = img[best];
        argmax[o] = best;
      }
    }
  }
}

void MaxPool2Backward(int B, int C, int H, int W, const float* dy, const int32_t* argmax,
                      float* dx) {
  const int OH = H / 2, OW = W / 2;
  std::fill(dx, dx + static_cast<size_t>(B) * C * H * W, 0.0f);
  for (int bc = 0; bc < B * C; ++bc) {
    for (int o = 0; o < OH * OW; ++o) {
      const size_t oi = static_cast<size_t>(bc) * OH * OW + o;
      dx[static_cast<size_t>(bc) * H * W + argmax[oi]] = dy[oi];  // 2x2 windows never overlap
    }
  }
}

void AvgPool2(int B, int C, int H, int W, const float* x, float* y) {
  const int OH = H / 2, OW = W / 2;
  for (int bc = 0; bc < B * C; ++bc) {
    const float* img = x + static_cast<size_t>(bc) * H * W;
    for (int oy = 0; oy < OH; ++oy) {
      for (int ox = 0; ox < OW; ++ox) {
        const float* p = img + (2 * oy) * W + 2 * ox;
        y[(static_cast<size_t>(bc) * OH + oy) * OW + ox] =
            (((p[0] + p[1]) + p[W]) + p[W + 1]) * 0.25f;
      }
    }
  }
}

void AvgPool2Backward(int B, int C, int H, int W, const float* dy, float* dx) {
  const int OH = H / 2, OW = W / 2;
  for (int bc = 0; bc < B * C; ++bc) {
    float* img = dx + static_cast<size_t>(bc) * H * W;
    for (int y = 0; y < H; ++y) {
      for (int x = 0; x < W; ++x) {
        img[y * W + x] = dy[(static_cast<size_t>(bc) * OH + y / 2) * OW + x / 2] * 0.25f;
      }
    }
  }
}

void BatchNormTrain(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                    float eps, float momentum, float* running_mean, float* running_var, float* y,
                    float* save_mean, float* save_invstd) {
  const float count = static_cast<float>(B) * static_cast<float>(P);
  for (int c = 0; c < C; ++c) {
    float sum[1], sq[1];
    ChannelSums(
        B, C, P, c, x, nullptr, [](float v, float, float(&part)[1]) { part[0] += v; }, sum);
    const float mean = sum[0] / count;
    ChannelSums(
        B, C, P, c, x, nullptr,
        [mean](float v, float, float(&part)[1]) {
          formulas::FoldSquaredDeviation(v, mean, &part[0]);
        },
        sq);
    save_mean[c] = mean;
    formulas::BatchNormFinish(mean, sq[0], count, eps, momentum, &save_invstd[c], &running_mean[c],
                              &running_var[c]);
    const float scale = gamma[c] * save_invstd[c];
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p)
        y[off + p] = formulas::BatchNormOutput(x[off + p], mean, scale, beta[c]);
    }
  }
}

void BatchNormEval(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                   float eps, const float* running_mean, const float* running_var, float* y) {
  for (int c = 0; c < C; ++c) {
    const float scale = gamma[c] * formulas::InvStd(running_var[c], eps);
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p)
        y[off + p] = formulas::BatchNormOutput(x[off + p], running_mean[c], scale, beta[c]);
    }
  }
}

void BatchNormEvalBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                           float eps, const float* running_mean, const float* running_var,
                           float* dx, float* dgamma, float* dbeta) {
  for (int c = 0; c < C; ++c) {
    const float mean = running_mean[c], invstd = formulas::InvStd(running_var[c], eps);
    if (dgamma != nullptr || dbeta != nullptr) {
      float sums[2];  // sum of dy, sum of dy * xhat
      ChannelSums(
          B, C, P, c, x, dy,
          [mean, invstd](float xv, float dyv, float(&part)[2]) {
            formulas::FoldBatchNormGrads(xv, dyv, mean, invstd, &part[0], &part[1]);
          },
          sums);
      if (dgamma != nullptr) dgamma[c] = sums[1];
      if (dbeta != nullptr) dbeta[c] = sums[0];
    }
    if (dx == nullptr) continue;
    const float scale = gamma[c] * invstd;
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p) dx[off + p] = dy[off + p] * scale;
    }
  }
}

void BatchNormBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                       const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                       float* dbeta) {
  const float count = static_cast<float>(B) * static_cast<float>(P);
  for (int c = 0; c < C; ++c) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    float sums[2];  // sum of dy, sum of dy * xhat
    ChannelSums(
        B, C, P, c, x, dy,
        [mean, invstd](float xv, float dyv, float(&part)[2]) {
          formulas::FoldBatchNormGrads(xv, dyv, mean, invstd, &part[0], &part[1]);
        },
        sums);
    const float sum_dy = sums[0], sum_dy_xhat = sums[1];
    dgamma[c] = sum_dy_xhat;
    dbeta[c] = sum_dy;
    const float k = gamma[c] * invstd / count;
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p) {
        dx[off + p] = formulas::BatchNormInputGrad(x[off + p], dy[off + p], mean, invstd, k, count,
                                                   sum_dy, sum_dy_xhat);
      }
    }
  }
}

void Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base, const float* x,
             float* y, float* mask) {
  const float scale = 1.0f / (1.0f - p);
  uint32_t bits[4];
  for (size_t i = 0; i < n; ++i) {
    if (i % 4 == 0) Philox4x32({key0, key1}, counter_base + i / 4, 0, bits);
    const float m = formulas::DropoutMask(bits[i % 4], p, scale);
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

void Mul(size_t n, const float* a, const float* b, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

float SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                          float* dlogits) {
  float total = 0.0f;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    total += formulas::SoftmaxCrossEntropyRow(classes, logits + static_cast<size_t>(r) * classes,
                                              labels[r], inv_rows,
                                              dlogits + static_cast<size_t>(r) * classes);
  }
  return total * inv_rows;
}

void Argmax(int rows, int classes, const float* logits, int32_t* out) {
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c) {
      if (z[c] > z[best]) best = c;
    }
    out[r] = best;
  }
}

}  // namespace easyscale::cpu

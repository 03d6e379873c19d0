// File: worker/src/cuda/cuda_kernels.h
//
// The CUDA kernels: one per CPU kernel of easyscale/worker/cpu_kernels.h, with
// the same signature plus a stream, on device pointers. Each computes the same
// operation sequence per output as its CPU twin (read the order there), so the
// bits are equal; parallelism is across outputs, and inside one output only
// where the order itself has independent parts (a GEMM's k blocks). Built with -fmad=false, IEEE
// division and square root, no flush-to-zero: the only fma is the explicit __fmaf_rn
// (detmath::Fma).
//
// Each function enqueues work on `stream` and returns the launch's error
// (cudaSuccess or the first failure); errors of the kernel itself surface at the
// next synchronisation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "easyscale/worker/kernel_formulas.h"

namespace easyscale::cuda {

// How many streams run this host thread's launches side by side (the resident
// backend's lanes between ForkLanes and JoinLanes, two between ForkSide and
// JoinSide on one lane; 1 otherwise). Gemm's 128x96 and 192x128 tiles run only alone, and Gemm and
// GemmBatched count every stream's 128x128 tiles as filling the GPU, so each
// lane's products keep the tiled kernel where one product alone would take the
// chain or one-thread-per-output kernel (an EST of 4 sequences' projections
// and attention). Convolutions' tile shapes (tiled::WithTiles) do not count
// them: ResNet-50's eight ESTs ran slower so (run 16). Speed only: every kernel
// the dispatch may pick runs the same order.
void SetSideBySideStreams(int streams);
int SideBySideStreams();

// C[i,j] = the sum over k in formulas::GemmOutput's order (fma chains over k
// blocks, added in block order), from 0 (or from C[i,j] when accumulate).
// Picks one of the kernels below by shape; all run the same order per output,
// so the choice changes speed only. A product of several k blocks takes
// M*N*blocks floats of stream-ordered scratch.
cudaError_t Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
                 int ldc, bool accumulate, cudaStream_t stream = nullptr);
// C[i,j] = (Gemm's chain from 0) + bias[j]: a product and then an Add of a
// bias broadcast over its rows (MatMul+Add), the bias added as the tiled
// kernels store each output where Gemm takes them for one k block, else by a
// pass over C after Gemm.
cudaError_t GemmBias(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     const float* bias, float* C, int ldc, cudaStream_t stream = nullptr);
// The GEMM kernels, exposed for tests and benchmarks: 128x128 register tiles
// (large products), one output per thread fed float4s along k through a
// cp.async ring (few outputs, long k blocks), one thread per output (few
// outputs, short K), one thread per column of a 4-row strip (many outputs,
// short K).
cudaError_t GemmTiled(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                      float* C, int ldc, bool accumulate, cudaStream_t stream = nullptr);
cudaError_t GemmChain(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                      float* C, int ldc, bool accumulate, cudaStream_t stream = nullptr);
cudaError_t GemmPerOutput(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                          float* C, int ldc, bool accumulate, cudaStream_t stream = nullptr);
cudaError_t GemmColumnStrip(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream = nullptr);
// The same register tiles in the shape cuda::tiled::WithTiles picks (128x128,
// 64x128 or 64x64), so a product of few tiles and long chains (a weight
// gradient) still spreads over every SM.
cudaError_t GemmFillTiles(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                          float* C, int ldc, bool accumulate, cudaStream_t stream = nullptr);
// `batch` independent products in one launch: C + b*stride_c = (A + b*stride_a)
// times (B + b*stride_b) for b < batch, each as Gemm computes it, K at most
// formulas::kGemmKBlock (one k block: no scratch).
cudaError_t GemmBatched(int batch, int M, int N, int K, const float* A, int lda, size_t stride_a,
                        const float* B, int ldb, size_t stride_b, float* C, int ldc,
                        size_t stride_c, bool accumulate, cudaStream_t stream = nullptr);
// GemmBatched with A or B read as stored transposed, so that a product of a
// transpose needs no transposed copy: a_transposed: entry b's A[i, k] is
// A[b * stride_a + k * lda + i] (lda >= M); b_transposed: its B[k, j] is
// B[b * stride_b + j * ldb + k] (ldb >= K). The same order per output.
cudaError_t GemmBatchedTransposed(int batch, int M, int N, int K, const float* A, int lda,
                                  size_t stride_a, bool a_transposed, const float* B, int ldb,
                                  size_t stride_b, bool b_transposed, float* C, int ldc,
                                  size_t stride_c, bool accumulate, cudaStream_t stream = nullptr);
// The entries of a batch laid out in two levels (each sample's heads in a
// [B, S, H, D] tensor, say): entry e is entry e % inner of group e / inner,
// and an operand's entry starts at group * (a, b or c) + entry * (a_inner,
// b_inner or c_inner) elements past its pointer.
struct GemmBatchStrides {
  int inner = 1;
  size_t a = 0, b = 0, c = 0;
  size_t a_inner = 0, b_inner = 0, c_inner = 0;
};
// GemmBatchedTransposed over entries at those offsets. The caller keeps the
// entries' outputs apart (the views of a permutation do).
cudaError_t GemmBatchedStrided(int batch, int M, int N, int K, const float* A, int lda,
                               bool a_transposed, const float* B, int ldb, bool b_transposed,
                               float* C, int ldc, const GemmBatchStrides& strides, bool accumulate,
                               cudaStream_t stream = nullptr);
// C[i, j] (ldc apart) = parts[0][i][j] + parts[1][i][j] + ..., added in part
// order: `blocks` dense M x N partial products laid end to end (a product's k
// blocks, or the row groups of MatMul's weight gradient).
cudaError_t SumParts(int M, int N, int blocks, const float* parts, float* C, int ldc,
                     cudaStream_t stream = nullptr);

cudaError_t Transpose(int rows, int cols, const float* src, float* dst,
                      cudaStream_t stream = nullptr);
// `batch` rows x cols matrices laid end to end, each transposed in place of
// its own (dst + b*rows*cols holds src + b*rows*cols's transpose).
cudaError_t TransposeBatch(int batch, int rows, int cols, const float* src, float* dst,
                           cudaStream_t stream = nullptr);
// The per-channel sums of [B, C, P] tensors: each sample's chain, then the
// samples' results in order (cpu_kernels.h); ChannelSum takes B*C floats of
// stream-ordered scratch, BatchNormTrain and BatchNormBackward 2*B*C.
// BatchNormTrain and BatchNormEval write `activation`'s Apply of each output
// (a BatchNormalization+Relu or +Clip); BatchNormBackward takes its gradient
// in, from each output recomputed from x (beta is read only then).
cudaError_t ChannelSum(int B, int C, int P, const float* dy, float* bias_grad,
                       cudaStream_t stream = nullptr);
cudaError_t BatchNormTrain(int B, int C, int P, const float* x, const float* gamma,
                           const float* beta, float eps, float momentum, float* running_mean,
                           float* running_var, float* y, float* save_mean, float* save_invstd,
                           formulas::Activation activation = {}, cudaStream_t stream = nullptr);
cudaError_t BatchNormEval(int B, int C, int P, const float* x, const float* gamma,
                          const float* beta, float eps, const float* running_mean,
                          const float* running_var, float* y, formulas::Activation activation = {},
                          cudaStream_t stream = nullptr);
cudaError_t BatchNormBackward(int B, int C, int P, const float* x, const float* dy,
                              const float* gamma, const float* beta, const float* save_mean,
                              const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                              formulas::Activation activation = {}, cudaStream_t stream = nullptr);

// One dropout's numbers (cpu::Dropout's scheme): drop probability p, the
// EST's key, and the first block's Philox counter, *counter_slot +
// counter_offset, read on the device (a replayed CUDA graph finds each step's
// value there), or counter_offset alone when counter_slot is null.
struct DropoutDraw {
  float p = 0.0f;
  PhiloxKey key;
  const uint64_t* counter_slot = nullptr;
  uint64_t counter_offset = 0;
#ifdef __CUDACC__
  // Block b's kept flags (elements 4b to 4b + 3: bits 0 to 3), on the device.
  __device__ unsigned KeptBits(uint64_t b) const {
    const uint64_t first = (counter_slot != nullptr ? *counter_slot : 0) + counter_offset;
    return formulas::DropoutKeptBits(key, first + b, p);
  }
#endif
};

// cpu::Dropout on the device (residual as its).
cudaError_t Dropout(size_t n, const DropoutDraw& draw, const float* x, const float* residual,
                    float* y, uint8_t* kept, cudaStream_t stream = nullptr);
cudaError_t DropoutBackward(size_t n, float p, const uint8_t* kept, const float* dy, float* dx,
                            cudaStream_t stream = nullptr);
// out = a + b element-wise (the graph runtime's gradient sums).
cudaError_t Add(size_t n, const float* a, const float* b, float* out,
                cudaStream_t stream = nullptr);

// Writes the mean loss to *loss (device memory, one float) instead of
// returning it, so a step needs no synchronisation. rows <= kMaxSoftmaxRows.
inline constexpr int kMaxSoftmaxRows = 8192;
cudaError_t SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                                float* dlogits, float* loss, cudaStream_t stream = nullptr);
cudaError_t Argmax(int rows, int classes, const float* logits, int32_t* out,
                   cudaStream_t stream = nullptr);

// fixed_point.h's AccumulateFixedPoint over up to kMaxFixedPointSegments
// gradient segments laid end to end in `acc`, from up to
// kMaxFixedPointSources sources: segments[j * count + s] is source j's segment
// s; acc[offset_s + i] += the sum over j of fixed(g_js[i]) (exact integers),
// nonfinite[j * nonfinite_stride + s] = 1 when source j's segment s holds NaN
// or inf.
inline constexpr int kMaxFixedPointSegments = 32;
inline constexpr int kMaxFixedPointSources = 8;
cudaError_t AccumulateFixedPoint(int count, int sources, const float* const* segments,
                                 const size_t* sizes, int64_t max_terms, int64_t* acc,
                                 int32_t* nonfinite, size_t nonfinite_stride,
                                 cudaStream_t stream = nullptr);
// dst[i] += src[i] over n fixed-point sums.
cudaError_t AddFixedPointSums(size_t n, const int64_t* src, int64_t* dst,
                              cudaStream_t stream = nullptr);
// KernelBackend::UpdateParams: the rule's update of each part's value[i] and
// its state from formulas::StepGradient (the sums decoded as they are read,
// never written to grad: a pass over the gradients fewer), every value on its
// own, one launch for up to kMaxParamParts parts (a model's hundreds of
// parameters: one launch each cost more than their bytes).
inline constexpr int kMaxParamParts = 64;
cudaError_t UpdateParams(const formulas::UpdateRule& rule, const formulas::ParamPart* parts,
                         size_t count, cudaStream_t stream = nullptr);

}  // namespace easyscale::cuda

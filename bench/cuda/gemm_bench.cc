// gemm_bench: the deterministic GEMM (worker/src/cuda/gemm.cu) against cuBLAS
// SGEMM with TF32 off, in one run: every variant at 4096^3 and at the CNN's and
// the MLP's own GEMM shapes (batch 16, 64 and 128), and the encoder's
// projections at one EST's micro-batch of 4 and 32 sequences, and tile shapes at
// the encoder's products. Prints GFLOP/s and
// our/cuBLAS ratios from CUDA-event medians (at the model's shapes also with
// both sides replayed from CUDA graphs, as the worker runs them), the encoder's
// micro-batch of 4 also on eight streams side by side (as eight ESTs' lanes run
// it: each kernel's time a call when eight run at once), one EST of 32
// sequences' independent products (a layer's dX beside its dW, as MatMul's
// gradient runs them on two streams; q beside k) against one after the
// other, and checks
// sampled outputs of every variant bit for bit against the CPU's
// formulas::GemmOutput (the same k order).
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda_kernels.h"
#include "device_buffer.h"
#include "easyscale/worker/kernel_formulas.h"
#include "easyscale/worker/philox.h"
#include "gemm_variants.h"

namespace {

using easyscale::cuda::DeviceBuffer;
using easyscale::cuda::ThrowIfError;

void CheckCublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s failed: cublas status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

std::vector<float> Random(size_t n, uint64_t seed) {
  easyscale::PhiloxStream r(easyscale::DeriveKey(seed, 5), 0);
  std::vector<float> v(n);
  for (float& x : v) x = 2.0f * r.NextUniform() - 1.0f;
  return v;
}

// How a batch of calls is timed: launched one by one from the host, or
// captured once into a CUDA graph and replayed (as the worker runs its step), so
// only the GPU's time counts.
enum class Timing { kLaunched, kGraphed };

using Call = std::function<void(cudaStream_t)>;

// calls[i] `reps` times on stream i of `streams`, all ordered after `stream` and
// before it again by events, as the resident backend forks and joins its lanes.
void SideBySide(const std::vector<Call>& calls, int reps, cudaStream_t stream,
                std::vector<cudaStream_t>& streams, std::vector<cudaEvent_t>& done) {
  ThrowIfError(cudaEventRecord(done[0], stream), "record");
  for (size_t l = 0; l < streams.size(); ++l) {
    ThrowIfError(cudaStreamWaitEvent(streams[l], done[0], 0), "wait");
    for (int i = 0; i < reps; ++i) calls[l](streams[l]);
  }
  for (size_t l = 0; l < streams.size(); ++l) {
    ThrowIfError(cudaEventRecord(done[l + 1], streams[l]), "record");
    ThrowIfError(cudaStreamWaitEvent(stream, done[l + 1], 0), "wait");
  }
}

// Median milliseconds of one round of `calls` (one call: on the timed stream;
// several: each on a stream of its own, all at once), from `trials`
// event-timed batches of `reps` rounds.
double MedianMs(const std::vector<Call>& calls, int reps, Timing timing, int trials = 7) {
  cudaStream_t stream = nullptr;
  ThrowIfError(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::vector<cudaStream_t> side_streams(calls.size() > 1 ? calls.size() : 0);
  std::vector<cudaEvent_t> done(side_streams.size() + 1);
  for (cudaStream_t& l : side_streams)
    ThrowIfError(cudaStreamCreateWithFlags(&l, cudaStreamNonBlocking), "stream");
  for (cudaEvent_t& e : done)
    ThrowIfError(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
  const auto rounds = [&](cudaStream_t st, int n) {
    if (side_streams.empty()) {
      for (int i = 0; i < n; ++i) calls[0](st);
    } else {
      SideBySide(calls, n, st, side_streams, done);
    }
  };
  rounds(stream, 3);  // warm-up: module load, handles, clocks
  ThrowIfError(cudaStreamSynchronize(stream), "warm-up");
  cudaGraphExec_t exec = nullptr;
  if (timing == Timing::kGraphed) {
    ThrowIfError(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
    rounds(stream, reps);
    cudaGraph_t graph = nullptr;
    ThrowIfError(cudaStreamEndCapture(stream, &graph), "end capture");
    ThrowIfError(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    cudaGraphDestroy(graph);
    ThrowIfError(cudaGraphLaunch(exec, stream), "graph warm-up");
  }
  cudaEvent_t start, stop;
  ThrowIfError(cudaEventCreate(&start), "event");
  ThrowIfError(cudaEventCreate(&stop), "event");
  std::vector<double> ms;
  for (int t = 0; t < trials; ++t) {
    ThrowIfError(cudaEventRecord(start, stream), "record");
    if (exec != nullptr) {
      ThrowIfError(cudaGraphLaunch(exec, stream), "graph launch");
    } else {
      rounds(stream, reps);
    }
    ThrowIfError(cudaEventRecord(stop, stream), "record");
    ThrowIfError(cudaEventSynchronize(stop), "sync");
    float elapsed = 0;
    ThrowIfError(cudaEventElapsedTime(&elapsed, start, stop), "elapsed");
    ms.push_back(elapsed / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  for (cudaEvent_t e : done) cudaEventDestroy(e);
  for (cudaStream_t l : side_streams) cudaStreamDestroy(l);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Shape {
  std::string name;
  int M, N, K;
};

using Launch = cudaError_t (*)(int, int, int, const float*, int, const float*, int, float*, int,
                               bool, cudaStream_t);

// Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets the operands swapped.
void CublasRowMajor(cublasHandle_t h, int M, int N, int K, const float* A, const float* B,
                    float* C) {
  const float one = 1.0f, zero = 0.0f;
  CheckCublas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, C, N),
              "cublasSgemm");
}

// Random operands of one shape, shared by every timed kernel.
struct Operands {
  std::vector<float> a, b;
  DeviceBuffer<float> A, B, C;
  explicit Operands(const Shape& s)
      : a(Random(static_cast<size_t>(s.M) * s.K, 1)),
        b(Random(static_cast<size_t>(s.K) * s.N, 2)),
        A(a),
        B(b),
        C(static_cast<size_t>(s.M) * s.N) {}
};

Call OursCall(const Shape& s, Operands& o, Launch fn) {
  return [&s, &o, fn](cudaStream_t st) {
    ThrowIfError(fn(s.M, s.N, s.K, o.A.get(), s.K, o.B.get(), s.N, o.C.get(), s.N, false, st),
                 "our gemm");
  };
}

// With `lanes` > 1, each call's time when that many run at once on streams of
// their own; every lane writes the same C (the same bits).
double OursMs(const Shape& s, Operands& o, Launch fn, int reps, Timing timing = Timing::kLaunched,
              int lanes = 1) {
  return MedianMs(std::vector<Call>(lanes, OursCall(s, o, fn)), reps, timing) / lanes;
}

double CublasMs(cublasHandle_t h, const Shape& s, Operands& o, int reps,
                Timing timing = Timing::kLaunched) {
  return MedianMs({[&](cudaStream_t st) {
                    CheckCublas(cublasSetStream(h, st), "cublasSetStream");
                    CublasRowMajor(h, s.M, s.N, s.K, o.A.get(), o.B.get(), o.C.get());
                  }},
                  reps, timing);
}

double Gflops(const Shape& s, double ms) { return 2.0 * s.M * s.N * s.K / (ms * 1e6); }

// Sampled outputs of one run of `ours` against formulas::GemmOutput, bit for bit.
int SampledMismatches(const Shape& s, Operands& o, Launch ours, int samples) {
  ThrowIfError(ours(s.M, s.N, s.K, o.A.get(), s.K, o.B.get(), s.N, o.C.get(), s.N, false, nullptr),
               "our gemm");
  const auto c = o.C.Download();
  easyscale::PhiloxStream r(easyscale::DeriveKey(13, 1), 0);
  int bad = 0;
  for (int t = 0; t < samples; ++t) {
    const int i = static_cast<int>(r.NextBelow(s.M)), j = static_cast<int>(r.NextBelow(s.N));
    const float acc = easyscale::formulas::GemmOutput(s.K, &o.a[static_cast<size_t>(i) * s.K], 1,
                                                      &o.b[j], s.N, 0.0f);
    bad += std::memcmp(&acc, &c[static_cast<size_t>(i) * s.N + j], sizeof acc) != 0;
  }
  return bad;
}

struct Variant {
  const char* name;
  Launch fn;
};

// The encoder's (d 768, T 128) projections and feed-forward layers at `batch`
// sequences; dx of the first feed-forward layer is ffn2's shape.
std::vector<Shape> EncoderShapes(int batch) {
  const int rows = batch * 128;
  return {
      {"qkvo fwd", rows, 768, 768}, {"ffn1 fwd", rows, 3072, 768}, {"ffn2 fwd", rows, 768, 3072}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (easyscale::cuda::UsableDeviceCount(&why) == 0) {
    std::fprintf(stderr, "gemm_bench: no GPU: %s\n", why.c_str());
    return 2;
  }
  // `gemm_bench shape M N K`: the dispatch timed three times on one shape (30 calls), for a
  // profiler.
  if (argc == 5 && std::string(argv[1]) == "shape") {
    const Shape s{"shape", std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4])};
    if (s.M <= 0 || s.N <= 0 || s.K <= 0) {
      std::fprintf(stderr, "gemm_bench: shape needs positive M N K\n");
      return 2;
    }
    Operands o(s);
    for (int i = 0; i < 3; ++i) OursMs(s, o, &easyscale::cuda::Gemm, 1);
    return 0;
  }
  const int big = argc > 1 ? std::atoi(argv[1]) : 4096;
  cudaDeviceProp prop{};
  ThrowIfError(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cublasHandle_t h;
  CheckCublas(cublasCreate(&h), "cublasCreate");
  // A workspace of its own, so cuBLAS allocates nothing while a graph is captured.
  DeviceBuffer<float> cublas_workspace(8u << 20);
  CheckCublas(
      cublasSetWorkspace(h, cublas_workspace.get(), cublas_workspace.size() * sizeof(float)),
      "cublasSetWorkspace");

  namespace ec = easyscale::cuda;
  const Shape square{std::to_string(big) + "^3", big, big, big};
  Operands big_ops(square);

  // cuBLAS in both non-TF32 modes; the default one is the reference below.
  for (auto [mode, label] :
       {std::pair{CUBLAS_PEDANTIC_MATH, "pedantic"}, std::pair{CUBLAS_DEFAULT_MATH, "default"}}) {
    CheckCublas(cublasSetMathMode(h, mode), "cublasSetMathMode");
    std::printf("cuBLAS %-8s %s: %.0f GFLOP/s\n", label, square.name.c_str(),
                Gflops(square, CublasMs(h, square, big_ops, 10)));
  }
  CheckCublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");

  const Variant big_variants[] = {{"BK=16 2 block/SM rows ", &ec::LaunchGemmTiled<16, 2, false>},
                                  {"GemmTiled (default)", &ec::GemmTiled},
                                  {"Gemm (dispatch)", &ec::Gemm}};
  std::printf("\n%-26s %10s %10s %10s %7s %s\n", square.name.c_str(), "ours ms", "GFLOP/s",
              "cuBLAS", "ratio", "bits (differ of 512 sampled)");
  for (const auto& v : big_variants) {
    const int bad = SampledMismatches(square, big_ops, v.fn, 512);
    const double ours = OursMs(square, big_ops, v.fn, 10);
    const double theirs = CublasMs(h, square, big_ops, 10);  // again, beside each variant
    std::printf("%-26s %10.3f %10.0f %10.0f %7.3f %d\n", v.name, ours, Gflops(square, ours),
                Gflops(square, theirs), theirs / ours, bad);
  }

  // Tile shapes at the encoder's products (one EST of 32 sequences): 128x128
  // tiles of a 768-column product are 192, 1.45 of a wave of one block on each
  // of an H100's 132 SMs, 0.73 of two waves; 192-row tiles are 132, 128x96
  // ones 256 (0.97 of two waves). "2/SM" columns: GemmTiled's kernel in that
  // tile; the others the general kernel's (tiled_gemm.cuh); Gemm: the dispatch.
  const Variant tile_variants[] = {{"128 2/SM", &ec::GemmTiled},
                                   {"128x96 2", &ec::LaunchGemmTiledShape<128, 96>},
                                   {"96x128 2", &ec::LaunchGemmTiledShape<96, 128>},
                                   {"128x64 2", &ec::LaunchGemmTiledShape<128, 64>},
                                   {"64x128", &ec::LaunchGemmTiles<64, 128>},
                                   {"128 1/SM", &ec::LaunchGemmTiles<128, 128>},
                                   {"192x128", &ec::LaunchGemmTiles<192, 128>},
                                   {"Gemm", &ec::Gemm}};
  std::printf("\ntile shapes %28s", "M x N x K, us:");
  for (const auto& v : tile_variants) std::printf(" %9s", v.name);
  std::printf(" %9s %s\n", "cuBLAS", "bits");
  const std::vector<Shape> tile_shapes = {
      {"qkvo fwd/dX", 4096, 768, 768},        {"ffn2 fwd, ffn1 dX", 4096, 768, 3072},
      {"ffn1 fwd, ffn2 dX", 4096, 3072, 768}, {"qkvo dW block", 768, 768, 256},
      {"ffn dW block", 768, 3072, 1024},      {"square", big, big, big}};
  for (const Shape& s : tile_shapes) {
    Operands o(s);
    std::printf("%-20s %5d x %5d x %5d", s.name.c_str(), s.M, s.N, s.K);
    int bad = 0;
    for (const auto& v : tile_variants) {
      bad += SampledMismatches(s, o, v.fn, 64);
      std::printf(" %9.1f", OursMs(s, o, v.fn, 20, Timing::kGraphed) * 1e3);
    }
    std::printf(" %9.1f %d\n", CublasMs(h, s, o, 20, Timing::kGraphed) * 1e3, bad);
  }

  // Products whose B is stored transposed ([N, K], as PyTorch keeps a linear
  // layer's weight) at the encoder's forward shapes: the tiled kernel reading
  // it so (GemmBatchedTransposed's one entry, 128x128 tiles) against the same
  // kernel on B as [K, N] (GemmTiled), the dispatch on B as [K, N], and
  // cuBLAS on each; replayed from graphs. bits: outputs of the B^T kernel
  // that differ from GemmTiled's.
  std::printf("\nB stored transposed %19s %9s %9s %9s %9s %9s %s\n", "M x N x K, us:", "128",
              "128 B^T", "Gemm", "cuBLAS", "cuBLAS B^T", "bits");
  for (const Shape& s : EncoderShapes(32)) {
    Operands o(s);
    std::vector<float> bt(o.b.size());
    for (int k = 0; k < s.K; ++k) {
      for (int n = 0; n < s.N; ++n) {
        bt[static_cast<size_t>(n) * s.K + k] = o.b[static_cast<size_t>(k) * s.N + n];
      }
    }
    const DeviceBuffer<float> Bt(bt);
    DeviceBuffer<float> Ct(static_cast<size_t>(s.M) * s.N);
    const Call ours_t = [&](cudaStream_t st) {
      ThrowIfError(ec::GemmBatchedTransposed(1, s.M, s.N, s.K, o.A.get(), s.K, 0, false, Bt.get(),
                                             s.K, 0, true, Ct.get(), s.N, 0, false, st),
                   "our gemm, B transposed");
    };
    const Call cublas_t = [&](cudaStream_t st) {
      const float one = 1.0f, zero = 0.0f;
      CheckCublas(cublasSetStream(h, st), "cublasSetStream");
      CheckCublas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, s.N, s.M, s.K, &one, Bt.get(), s.K,
                              o.A.get(), s.K, &zero, o.C.get(), s.N),
                  "cublasSgemm");
    };
    ThrowIfError(ec::GemmTiled(s.M, s.N, s.K, o.A.get(), s.K, o.B.get(), s.N, o.C.get(), s.N, false,
                               nullptr),
                 "our gemm");
    ours_t(nullptr);
    const std::vector<float> c = o.C.Download(), ct = Ct.Download();
    int bad = 0;
    for (size_t e = 0; e < c.size(); ++e) bad += std::memcmp(&c[e], &ct[e], sizeof c[e]) != 0;
    std::printf("%-20s %5d x %5d x %5d %9.1f %9.1f %9.1f %9.1f %9.1f %d\n", s.name.c_str(), s.M,
                s.N, s.K, OursMs(s, o, &ec::GemmTiled, 20, Timing::kGraphed) * 1e3,
                MedianMs({ours_t}, 20, Timing::kGraphed) * 1e3,
                OursMs(s, o, &ec::Gemm, 20, Timing::kGraphed) * 1e3,
                CublasMs(h, s, o, 20, Timing::kGraphed) * 1e3,
                MedianMs({cublas_t}, 20, Timing::kGraphed) * 1e3, bad);
  }

  // Column order of the CNN tables.
  const Variant small_variants[] = {
      {"per-out", &ec::GemmPerOutput}, {"strip", &ec::GemmColumnStrip}, {"chain", &ec::GemmChain},
      {"tiled", &ec::GemmTiled},       {"fill", &ec::GemmFillTiles},    {"Gemm", &ec::Gemm}};
  constexpr int kSmall = sizeof small_variants / sizeof small_variants[0];
  const std::pair<const char*, std::vector<int>> tables[] = {
      {"cnn", {16, 64, 128}}, {"mlp", {16, 64, 128}}, {"encoder", {4, 32}}};
  for (const auto& [model, batches] : tables) {
    for (int b : batches) {
      const int p1 = b * 576, p2 = b * 64;
      const std::vector<Shape> shapes =
          std::string(model) == "cnn"
              ? std::vector<Shape>{{"conv1 fwd", 8, p1, 25},   {"conv1 dW", 8, 25, p1},
                                   {"conv1 dcols", 25, p1, 8}, {"conv2 fwd", 16, p2, 200},
                                   {"conv2 dW", 16, 200, p2},  {"conv2 dcols", 200, p2, 16},
                                   {"fc1 fwd", b, 64, 256},    {"fc1 dW", 64, 256, b},
                                   {"fc1 dx", b, 256, 64},     {"fc2 fwd", b, 10, 64},
                                   {"fc2 dW", 10, 64, b},      {"fc2 dx", b, 64, 10}}
          : std::string(model) == "mlp"
              // The MLP: 14x14 average-pooled digits, 196 -> 128 -> 10.
              ? std::vector<Shape>{{"fc1 fwd", b, 128, 196}, {"fc1 dW", 128, 196, b},
                                   {"fc1 dx", b, 196, 128},  {"fc2 fwd", b, 10, 128},
                                   {"fc2 dW", 10, 128, b},   {"fc2 dx", b, 128, 10}}
              : EncoderShapes(b);
      std::printf("\n%s batch %-4d %18s", model, b, "M x N x K, us:");
      for (const auto& v : small_variants) std::printf(" %8s", v.name);
      std::printf(" %8s %6s | %8s %8s %6s %s\n", "cuBLAS", "ratio", "Gemm g", "cuBLAS g", "ratio",
                  "bits");
      std::vector<double> totals(kSmall, 0.0);
      double cublas_total = 0, graphed_total = 0, cublas_graphed_total = 0;
      for (const Shape& s : shapes) {
        Operands o(s);
        std::printf("%-11s %5d x %5d x %5d", s.name.c_str(), s.M, s.N, s.K);
        int bad = 0;
        double dispatch = 0;
        for (int v = 0; v < kSmall; ++v) {
          bad += SampledMismatches(s, o, small_variants[v].fn, 64);
          const double ms = OursMs(s, o, small_variants[v].fn, 50);
          totals[v] += ms;
          dispatch = ms;  // the last column is Gemm
          std::printf(" %8.1f", ms * 1e3);
        }
        const double theirs = CublasMs(h, s, o, 50);
        cublas_total += theirs;
        // The same two replayed from CUDA graphs: GPU time without launch costs.
        const double graphed = OursMs(s, o, &ec::Gemm, 50, Timing::kGraphed);
        const double theirs_graphed = CublasMs(h, s, o, 50, Timing::kGraphed);
        graphed_total += graphed;
        cublas_graphed_total += theirs_graphed;
        std::printf(" %8.1f %6.3f | %8.1f %8.1f %6.3f %d\n", theirs * 1e3, theirs / dispatch,
                    graphed * 1e3, theirs_graphed * 1e3, theirs_graphed / graphed, bad);
      }
      std::printf("%-33s", ("all " + std::to_string(shapes.size())).c_str());
      for (double t : totals) std::printf(" %8.1f", t * 1e3);
      std::printf(" %8.1f %6.3f | %8.1f %8.1f %6.3f\n", cublas_total * 1e3,
                  cublas_total / totals.back(), graphed_total * 1e3, cublas_graphed_total * 1e3,
                  cublas_graphed_total / graphed_total);
    }
  }

  // Eight ESTs of 4 sequences against one of 32: each lane's products on a
  // stream of its own, all replayed from one CUDA graph (as the worker's lanes
  // replay theirs), in microseconds a call; "one of 32 / 8" is the dispatch's
  // product at 32 sequences, an eighth of it.
  const Variant lane_variants[] = {{"chain", &ec::GemmChain},
                                   {"tiled", &ec::GemmTiled},
                                   {"fill", &ec::GemmFillTiles},
                                   {"Gemm", &ec::Gemm}};
  constexpr int kLanes = 8;
  std::printf("\nencoder batch 4 on %d lanes %8s", kLanes, "us a call:");
  for (const auto& v : lane_variants) std::printf(" %8s", v.name);
  std::printf(" %12s %6s\n", "one of 32 / 8", "ratio");
  const std::vector<Shape> whole = EncoderShapes(32);
  double lanes_total = 0, whole_total = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    const Shape s = EncoderShapes(4)[i];
    Operands o(s), w(whole[i]);
    std::printf("%-11s %5d x %5d x %5d", s.name.c_str(), s.M, s.N, s.K);
    double dispatch = 0;
    for (const auto& v : lane_variants) {
      dispatch = OursMs(s, o, v.fn, 20, Timing::kGraphed, kLanes);  // the last column is Gemm
      std::printf(" %8.1f", dispatch * 1e3);
    }
    const double eighth = OursMs(whole[i], w, &ec::Gemm, 20, Timing::kGraphed) / kLanes;
    lanes_total += dispatch;
    whole_total += eighth;
    std::printf(" %12.1f %6.3f\n", eighth * 1e3, eighth / dispatch);
  }
  std::printf("%-33s %*s %12.1f %6.3f (Gemm on %d lanes: %.1f)\n", "all 3",
              9 * static_cast<int>(std::size(lane_variants)), "", whole_total * 1e3,
              whole_total / lanes_total, kLanes, lanes_total * 1e3);

  // One EST of 32 sequences' backward products: a layer's dX (Gemm) and dW
  // (GemmFillTiles, as MatMul's gradient takes it) are independent, and neither
  // fills the GPU alone where N is 768; one after the other on one stream
  // against each on a stream of its own, and the attention's q, k and v
  // projections (independent, the same shape) likewise, replayed from graphs.
  std::printf("\nencoder batch 32, independent products  us a round: %10s %10s %8s\n", "one stream",
              "side by side", "ratio");
  struct Pair {
    const char* name;
    Shape first, second;
    Launch first_fn, second_fn;
  };
  const Pair pairs[] = {
      {"qkvo dX | dW",
       {"dX", 4096, 768, 768},
       {"dW", 768, 768, 4096},
       &ec::Gemm,
       &ec::GemmFillTiles},
      {"ffn1 dX | dW",
       {"dX", 4096, 768, 3072},
       {"dW", 768, 3072, 4096},
       &ec::Gemm,
       &ec::GemmFillTiles},
      {"ffn2 dX | dW",
       {"dX", 4096, 3072, 768},
       {"dW", 3072, 768, 4096},
       &ec::Gemm,
       &ec::GemmFillTiles},
      {"q | k fwd", {"q", 4096, 768, 768}, {"k", 4096, 768, 768}, &ec::Gemm, &ec::Gemm}};
  double serial_total = 0, side_total = 0;
  for (const Pair& p : pairs) {
    Operands a(p.first), b(p.second);
    const Call first = OursCall(p.first, a, p.first_fn),
               second = OursCall(p.second, b, p.second_fn);
    const double serial = MedianMs({[&](cudaStream_t st) {
                                     first(st);
                                     second(st);
                                   }},
                                   20, Timing::kGraphed);
    const double side = MedianMs({first, second}, 20, Timing::kGraphed);
    serial_total += serial;
    side_total += side;
    std::printf("%-40s %10.1f %10.1f %8.3f\n", p.name, serial * 1e3, side * 1e3, serial / side);
  }
  std::printf("%-40s %10.1f %10.1f %8.3f\n", "all", serial_total * 1e3, side_total * 1e3,
              serial_total / side_total);
  cublasDestroy(h);
  return 0;
}

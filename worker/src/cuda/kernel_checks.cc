#include "kernel_checks.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "cuda_kernels.h"
#include "device_buffer.h"
#include "easyscale/worker/backend.h"
#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/philox.h"
#include "gemm_variants.h"

namespace easyscale::cuda {
namespace {

// Uniform in [-1, 1); with `ties`, rounded to multiples of 1/4 so pooling and
// argmax meet equal values; a few signed zeros and tiny values mixed in.
std::vector<float> Random(size_t n, uint64_t seed, bool ties = false) {
  PhiloxStream r(DeriveKey(seed, 7), 0);
  std::vector<float> v(n);
  for (float& x : v) {
    x = 2.0f * r.NextUniform() - 1.0f;
    if (ties) x = static_cast<float>(static_cast<int>(x * 4.0f)) / 4.0f;
  }
  for (size_t i = 0; i + 97 < n; i += 97) v[i] = (i % 2) ? -0.0f : 1e-30f;
  return v;
}

template <typename T>
std::string FirstDifference(const std::vector<T>& cpu, const std::vector<T>& gpu) {
  if (cpu.size() != gpu.size()) return "size differs";
  size_t count = 0, first = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (std::memcmp(&cpu[i], &gpu[i], sizeof(T)) != 0 && count++ == 0) first = i;
  }
  if (count == 0) return "";
  std::ostringstream out;
  out.precision(9);
  out << count << " of " << cpu.size() << " differ; first at " << first << ": cpu " << +cpu[first]
      << " gpu " << +gpu[first];
  return out.str();
}

// Runs one check: `body` returns the differences it found ("" for none).
void Run(std::vector<KernelCheck>* out, const std::string& name,
         const std::function<std::string()>& body) {
  KernelCheck c;
  c.name = name;
  try {
    c.detail = body();
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess && c.detail.empty()) c.detail = cudaGetErrorString(err);
  } catch (const std::exception& e) {
    c.detail = e.what();
  }
  c.equal = c.detail.empty();
  out->push_back(std::move(c));
}

// Appends "; name: difference" for each output that differs.
template <typename T>
void Compare(std::string* diffs, const char* what, const std::vector<T>& cpu,
             const DeviceBuffer<T>& gpu) {
  const std::string d = FirstDifference(cpu, gpu.Download());
  if (!d.empty()) *diffs += std::string(diffs->empty() ? "" : "; ") + what + ": " + d;
}

using GemmFn = cudaError_t (*)(int, int, int, const float*, int, const float*, int, float*, int,
                               bool, cudaStream_t);

struct GemmShape {
  int M, N, K;
  int lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
  bool accumulate = false;
};

// fn's product against cpu::Gemm's; with fn null, GemmBias's against
// cpu::Gemm's and then the bias added to each row (a MatMul+Add).
std::string CheckOneGemm(GemmFn fn, const GemmShape& s, uint64_t seed) {
  const int lda = s.K + s.lda_pad, ldb = s.N + s.ldb_pad, ldc = s.N + s.ldc_pad;
  const auto A = Random(static_cast<size_t>(s.M) * lda, seed);
  const auto B = Random(static_cast<size_t>(s.K) * ldb + 1, seed + 1);
  auto C = Random(static_cast<size_t>(s.M) * ldc, seed + 2);
  const auto bias = Random(static_cast<size_t>(s.N), seed + 3);
  DeviceBuffer<float> dA(A), dB(B), dC(C), dbias(bias);
  cpu::Gemm(s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), ldc, s.accumulate);
  if (fn == nullptr) {
    for (int i = 0; i < s.M; ++i) {
      for (int j = 0; j < s.N; ++j) {
        float& c = C[static_cast<size_t>(i) * ldc + j];
        c = c + bias[j];
      }
    }
  }
  ThrowIfError(
      fn != nullptr
          ? fn(s.M, s.N, s.K, dA.get(), lda, dB.get(), ldb, dC.get(), ldc, s.accumulate, nullptr)
          : GemmBias(s.M, s.N, s.K, dA.get(), lda, dB.get(), ldb, dbias.get(), dC.get(), ldc),
      "gemm launch");
  std::string diffs;
  Compare(&diffs, "C", C, dC);  // also proves the padding columns were left alone
  return diffs;
}

}  // namespace

std::vector<KernelCheck> CheckGemms(uint64_t seed) {
  std::vector<GemmShape> shapes;
  // The CNN's nine GEMMs (forward, weight gradient, input gradient of conv1,
  // conv2, fc1, fc2) at the per-EST and the whole-step batch.
  for (int b : {16, 128}) {
    const int p1 = b * 576, p2 = b * 64;
    for (GemmShape g : {GemmShape{8, p1, 25}, GemmShape{8, 25, p1}, GemmShape{25, p1, 8},
                        GemmShape{16, p2, 200}, GemmShape{16, 200, p2}, GemmShape{200, p2, 16},
                        GemmShape{b, 64, 256}, GemmShape{64, 256, b}, GemmShape{b, 256, 64},
                        GemmShape{b, 10, 64}, GemmShape{10, 64, b}, GemmShape{b, 64, 10}})
      shapes.push_back(g);
  }
  // Awkward: partial tiles everywhere, unaligned leading dimensions (the
  // scalar load path), accumulate, empty K, and a few full tiles.
  shapes.push_back({1, 1, 1});
  shapes.push_back({130, 257, 67});
  shapes.push_back({129, 131, 1000, 3, 1, 2});
  shapes.push_back({200, 300, 17, 0, 0, 0, true});
  shapes.push_back({256, 256, 256, 0, 0, 0, true});
  shapes.push_back({64, 64, 0, 0, 0, 0, true});
  shapes.push_back({64, 64, 0});
  shapes.push_back({512, 384, 520});
  shapes.push_back({1000, 999, 333, 1, 3, 5});
  // Long K past the chain kernel's cp.async ring, with a partial last chunk:
  // A rows 16-byte aligned (K = 2050 also ends inside a float4) or not.
  shapes.push_back({24, 40, 1000, 0, 0, 0, true});
  shapes.push_back({8, 25, 2050, 2, 0, 0});
  shapes.push_back({9, 27, 1000, 3, 1, 2});
  shapes.push_back({17, 33, 777, 0, 0, 0, true});
  // Several k blocks (formulas::kGemmKBlock): a partial last block, accumulate
  // (only block 0 starts from C), unaligned rows, exactly one full block.
  shapes.push_back({8, 25, 2 * 4096 + 3, 2, 0, 0, true});
  shapes.push_back({130, 140, 4097, 0, 0, 0, true});
  shapes.push_back({16, 200, 4096});
  // Many tiles, partial at the edges (GemmFillTiles: 64x64 tiles), and enough
  // 128x128 tiles to fill the GPU.
  shapes.push_back({600, 700, 45, 0, 0, 0, true});
  shapes.push_back({2100, 2060, 40, 0, 0, 0, true});
  // 768 columns: 192 of 128x128 tiles, which Gemm runs alone in 256 of 128x96
  // on 132 SMs (an H100's or H200's) and beside other streams in 128x128; 192-
  // and 96-row tiles end in a partial tile row.
  shapes.push_back({4096, 768, 200, 0, 0, 0, true});

  const struct {
    const char* name;
    GemmFn fn;
  } kernels[] = {{"Gemm", &Gemm},
                 {"GemmTiled", &GemmTiled},
                 {"GemmFillTiles", &GemmFillTiles},
                 {"GemmPerOutput", &GemmPerOutput},
                 {"GemmColumnStrip", &GemmColumnStrip},
                 {"GemmTiled<16,2,rows>", &LaunchGemmTiled<16, 2, false>},
                 {"GemmTiles<192,128>", &LaunchGemmTiles<192, 128>},
                 {"GemmTiled<128x96>", &LaunchGemmTiledShape<128, 96>},
                 {"GemmTiled<96x128>", &LaunchGemmTiledShape<96, 128>},
                 {"GemmTiled<128x64>", &LaunchGemmTiledShape<128, 64>},
                 {"GemmChain", &GemmChain}};
  std::vector<KernelCheck> out;
  for (const auto& k : kernels) {
    for (const GemmShape& s : shapes) {
      // The small-tile kernels on the largest square shapes only cost time.
      if ((k.fn == &GemmPerOutput || k.fn == &GemmColumnStrip || k.fn == &GemmChain) && s.M >= 512)
        continue;
      std::ostringstream name;
      name << k.name << " " << s.M << "x" << s.N << "x" << s.K
           << (s.lda_pad + s.ldb_pad + s.ldc_pad ? " padded" : "")
           << (s.accumulate ? " accumulate" : "");
      Run(&out, name.str(), [&] { return CheckOneGemm(k.fn, s, seed++); });
    }
  }
  // The dispatch as eight lanes side by side run it (SideBySideStreams): the
  // 128x128 tiles for products of 8 to 63 of them, which alone would take
  // other kernels (an EST of 4 sequences' projections; partial tiles at the
  // edges, accumulate, two k blocks with unaligned rows), and one too small
  // for that still.
  for (GemmShape s : {GemmShape{512, 768, 768}, GemmShape{4096, 768, 200, 0, 0, 0, true},
                      GemmShape{300, 520, 67}, GemmShape{260, 300, 17, 0, 0, 0, true},
                      GemmShape{200, 520, 4100, 1, 0, 0}, GemmShape{130, 257, 67}}) {
    std::ostringstream name;
    name << "Gemm " << s.M << "x" << s.N << "x" << s.K << " on 8 streams side by side";
    Run(&out, name.str(), [&] {
      SetSideBySideStreams(8);
      const std::string diffs = CheckOneGemm(&Gemm, s, seed++);
      SetSideBySideStreams(1);
      return diffs;
    });
  }
  // GemmBias (a linear layer's MatMul+Add): in the tiled kernel's 128x96 and
  // 128x128 tiles, alone and side by side, and through Gemm and a pass over
  // C elsewhere (small, thin, several k blocks, padded rows).
  for (GemmShape s :
       {GemmShape{4096, 768, 200}, GemmShape{2100, 2060, 40}, GemmShape{512, 768, 768},
        GemmShape{130, 257, 67}, GemmShape{16, 200, 4096}, GemmShape{130, 140, 4097},
        GemmShape{1000, 999, 333, 1, 3, 5}, GemmShape{1, 1, 1}}) {
    for (int streams : {1, 8}) {
      std::ostringstream name;
      name << "GemmBias " << s.M << "x" << s.N << "x" << s.K
           << (s.lda_pad + s.ldb_pad + s.ldc_pad ? " padded" : "")
           << (streams > 1 ? " on 8 streams side by side" : "");
      Run(&out, name.str(), [&] {
        SetSideBySideStreams(streams);
        const std::string diffs = CheckOneGemm(nullptr, s, seed++);
        SetSideBySideStreams(1);
        return diffs;
      });
    }
  }
  // Batched: attention's products (64 wide: 128x64 and 64x128 tiles, partial
  // ones too), thin ones (one thread per output), a whole k block,
  // accumulate, and entries spaced apart (stride past the matrix); on one
  // stream and on eight side by side, where the dispatch takes the tiled
  // kernel for more of them (attention's at 4 sequences an EST).
  struct Batched {
    int batch;
    GemmShape s;
    int gap = 0;
  };
  // One batched product against the CPU's, entry by entry; with a_t or b_t
  // through GemmBatchedTransposed, that operand stored transposed (A K x M, B
  // N x K) and the CPU given its transposed copy.
  const auto check_batched = [&](const Batched& b, bool a_t, bool b_t, int streams) {
    const GemmShape& s = b.s;
    const size_t sa = static_cast<size_t>(s.M) * s.K + b.gap;
    const size_t sb = static_cast<size_t>(s.K) * s.N + b.gap;
    const size_t sc = static_cast<size_t>(s.M) * s.N + b.gap;
    const auto A = Random(b.batch * sa, seed++);
    const auto B = Random(b.batch * sb, seed++);
    auto C = Random(b.batch * sc, seed++);
    DeviceBuffer<float> dA(A), dB(B), dC(C);
    std::vector<float> at(static_cast<size_t>(s.M) * s.K), bt(static_cast<size_t>(s.K) * s.N);
    for (int e = 0; e < b.batch; ++e) {
      const float* ea = A.data() + e * sa;
      const float* eb = B.data() + e * sb;
      if (a_t) cpu::Transpose(s.K, s.M, ea, at.data());
      if (b_t) cpu::Transpose(s.N, s.K, eb, bt.data());
      cpu::Gemm(s.M, s.N, s.K, a_t ? at.data() : ea, s.K, b_t ? bt.data() : eb, s.N,
                C.data() + e * sc, s.N, s.accumulate);
    }
    SetSideBySideStreams(streams);
    const cudaError_t err =
        a_t || b_t ? GemmBatchedTransposed(b.batch, s.M, s.N, s.K, dA.get(), a_t ? s.M : s.K, sa,
                                           a_t, dB.get(), b_t ? s.K : s.N, sb, b_t, dC.get(), s.N,
                                           sc, s.accumulate)
                   : GemmBatched(b.batch, s.M, s.N, s.K, dA.get(), s.K, sa, dB.get(), s.N, sb,
                                 dC.get(), s.N, sc, s.accumulate);
    SetSideBySideStreams(1);
    ThrowIfError(err, "launch");
    std::string diffs;
    Compare(&diffs, "C", C, dC);
    return diffs;
  };
  const auto name_of = [](const char* kernel, const Batched& b) {
    std::ostringstream name;
    name << kernel << " " << b.batch << "x" << b.s.M << "x" << b.s.N << "x" << b.s.K
         << (b.gap ? " spaced" : "") << (b.s.accumulate ? " accumulate" : "");
    return name.str();
  };
  for (int streams : {1, 8}) {
    for (const Batched& b :
         {Batched{24, {128, 128, 64}}, Batched{24, {128, 64, 128}}, Batched{24, {64, 128, 128}},
          Batched{64, {128, 128, 64}}, Batched{64, {128, 64, 128}}, Batched{64, {64, 128, 128}},
          Batched{70, {130, 64, 33}, 2}, Batched{70, {64, 130, 33, 0, 0, 0, true}},
          Batched{7, {37, 53, 29}, 5}, Batched{3, {64, 96, 4096}},
          Batched{5, {130, 257, 67, 0, 0, 0, true}, 3}, Batched{6, {33, 20, 17, 0, 0, 0, true}}}) {
      Run(&out, name_of("GemmBatched", b) + (streams > 1 ? " on 8 streams side by side" : ""),
          [&] { return check_batched(b, false, false, streams); });
    }
  }
  // Operands read as stored transposed (MatMul's gradients): tiled (64 and 72
  // tiles: full, and partial, spaced and accumulating; 128x64 and 64x128) and
  // one thread per output (a whole k block among them).
  for (const Batched& b :
       {Batched{64, {128, 128, 64}}, Batched{12, {130, 257, 67, 0, 0, 0, true}, 3},
        Batched{64, {128, 64, 128}}, Batched{64, {64, 128, 128}}, Batched{7, {37, 53, 29}, 5},
        Batched{3, {64, 96, 4096}}}) {
    for (auto [a_t, b_t] :
         {std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
      Run(&out, name_of("GemmBatchedTransposed", b) + (a_t ? " A^T" : "") + (b_t ? " B^T" : ""),
          [&, a_t = a_t, b_t = b_t] { return check_batched(b, a_t, b_t, 1); });
    }
  }
  return out;
}

std::vector<KernelCheck> CheckLayoutKernels(uint64_t seed) {
  std::vector<KernelCheck> out;
  struct Bcp {
    int B, C, P;
  };
  for (const Bcp& s : {Bcp{16, 8, 576}, Bcp{128, 16, 64}, Bcp{3, 5, 7}}) {
    const size_t n = static_cast<size_t>(s.B) * s.C * s.P;
    const std::string shape =
        " " + std::to_string(s.B) + "x" + std::to_string(s.C) + "x" + std::to_string(s.P);
    // Plain, and with a residual added (a Dropout+Add).
    for (const bool with_residual : {false, true}) {
      Run(&out, (with_residual ? "Dropout+Add" : "Dropout") + shape, [&] {
        const auto x = Random(n, seed++), g = Random(n, seed++), r = Random(n, seed++);
        const uint64_t base = (1ull << 33) + 5 + seed;
        const uint32_t key1 = 0x9876u + static_cast<uint32_t>(seed);
        std::vector<float> y(n), gx(n);
        std::vector<uint8_t> kept(n);
        cpu::Dropout(n, 0.3f, 0x1234u, key1, base, x.data(), with_residual ? r.data() : nullptr,
                     y.data(), kept.data());
        cpu::DropoutBackward(n, 0.3f, kept.data(), g.data(), gx.data());
        // The counter as a replayed graph finds it: most of it in device memory.
        DeviceBuffer<uint64_t> slot(std::vector<uint64_t>{base - 7});
        DeviceBuffer<float> dx(x), dr(r), dy(n), dg(g), dgx(n);
        DeviceBuffer<uint8_t> dkept(n);
        const DropoutDraw draw{0.3f, {0x1234u, key1}, slot.get(), 7};
        ThrowIfError(
            Dropout(n, draw, dx.get(), with_residual ? dr.get() : nullptr, dy.get(), dkept.get()),
            "launch");
        ThrowIfError(DropoutBackward(n, 0.3f, dkept.get(), dg.get(), dgx.get()), "launch");
        std::string d;
        Compare(&d, "y", y, dy);
        Compare(&d, "kept", kept, dkept);
        Compare(&d, "dx", gx, dgx);
        return d;
      });
    }
    // The runtime's sum of a value's gradients, in place as the program runs it.
    Run(&out, "Add" + shape, [&] {
      const auto a = Random(n, seed++), b = Random(n, seed++);
      std::vector<float> sum(n);
      for (size_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
      DeviceBuffer<float> da(a), db(b);
      ThrowIfError(Add(n, da.get(), db.get(), da.get()), "launch");
      std::string d;
      Compare(&d, "sum", sum, da);
      return d;
    });
  }
  for (auto [rows, cols] : {std::pair{200, 16 * 64}, std::pair{37, 53}, std::pair{128, 64}}) {
    const std::string shape = " " + std::to_string(rows) + "x" + std::to_string(cols);
    const size_t n = static_cast<size_t>(rows) * cols;
    Run(&out, "Transpose" + shape, [&] {
      const auto x = Random(n, seed++);
      std::vector<float> t(n);
      cpu::Transpose(rows, cols, x.data(), t.data());
      DeviceBuffer<float> dx(x), dt(n);
      ThrowIfError(Transpose(rows, cols, dx.get(), dt.get()), "launch");
      std::string d;
      Compare(&d, "transpose", t, dt);
      return d;
    });
    Run(&out, "TransposeBatch 3x" + shape.substr(1), [&] {
      const auto x = Random(3 * n, seed++);
      std::vector<float> t(3 * n);
      for (int b = 0; b < 3; ++b) cpu::Transpose(rows, cols, x.data() + b * n, t.data() + b * n);
      DeviceBuffer<float> dx(x), dt(3 * n);
      ThrowIfError(TransposeBatch(3, rows, cols, dx.get(), dt.get()), "launch");
      std::string d;
      Compare(&d, "transpose", t, dt);
      return d;
    });
  }
  return out;
}

std::vector<KernelCheck> CheckReductionKernels(uint64_t seed) {
  std::vector<KernelCheck> out;
  struct Bcp {
    int B, C, P;
  };
  // Samples a warp of 32 and more, rows of whole and partial 32-position
  // slices, float4 rows and others (P % 4 != 0), positions fewer than 32.
  for (const Bcp& s :
       {Bcp{16, 8, 576}, Bcp{128, 8, 576}, Bcp{128, 16, 64}, Bcp{1, 3, 1}, Bcp{45, 3, 3136},
        Bcp{70, 4, 100}, Bcp{37, 5, 49}, Bcp{33, 2, 1030}, Bcp{3, 7, 17}}) {
    const size_t n = static_cast<size_t>(s.B) * s.C * s.P;
    const std::string shape =
        " " + std::to_string(s.B) + "x" + std::to_string(s.C) + "x" + std::to_string(s.P);
    Run(&out, "ChannelSum" + shape, [&] {
      const auto dy = Random(n, seed++);
      std::vector<float> g(s.C);
      cpu::ChannelSum(s.B, s.C, s.P, dy.data(), g.data());
      DeviceBuffer<float> ddy(dy), dg(s.C);
      ThrowIfError(ChannelSum(s.B, s.C, s.P, ddy.get(), dg.get()), "launch");
      std::string d;
      Compare(&d, "sum", g, dg);
      return d;
    });
    // Plain, rectified and clipped (a BatchNormalization+Relu's and +Clip's
    // passes: the backward takes the activation's rule from y recomputed).
    using formulas::Activation;
    for (const Activation act :
         {Activation{}, Activation{Activation::kRelu}, Activation{Activation::kClip, 0.0f, 0.5f}}) {
      const char* kNames[] = {"BatchNormTrain+Eval+Backward", "BatchNormTrain+Eval+Backward+Relu",
                              "BatchNormTrain+Eval+Backward+Clip"};
      Run(&out, kNames[act.kind] + shape, [&] {
        auto x = Random(n, seed++);
        for (float& v : x) v = 3.0f * v + 0.5f;  // a mean and variance far from 0 and 1
        const auto gamma = Random(s.C, seed++), beta = Random(s.C, seed++);
        const auto dy = Random(n, seed++);
        auto rmean = Random(s.C, seed++), rvar = Random(s.C, seed++);
        for (float& v : rvar) v = v * v + 0.1f;
        const float eps = 1e-5f, momentum = 0.1f;
        DeviceBuffer<float> dxin(x), dgamma(gamma), dbeta(beta), ddy(dy), drmean(rmean),
            drvar(rvar), dy_out(n), dsm(s.C), dsi(s.C), deval(n), ddx(n), ddg(s.C), ddb(s.C);
        std::vector<float> y(n), sm(s.C), si(s.C), yeval(n), dx(n), dg(s.C), db(s.C), dya(n);
        cpu::BatchNormTrain(s.B, s.C, s.P, x.data(), gamma.data(), beta.data(), eps, momentum,
                            rmean.data(), rvar.data(), y.data(), sm.data(), si.data());
        cpu::BatchNormEval(s.B, s.C, s.P, x.data(), gamma.data(), beta.data(), eps, rmean.data(),
                           rvar.data(), yeval.data());
        for (size_t i = 0; i < n; ++i) {
          dya[i] = act.Grad(y[i], dy[i]);
          y[i] = act.Apply(y[i]);
          yeval[i] = act.Apply(yeval[i]);
        }
        cpu::BatchNormBackward(s.B, s.C, s.P, x.data(), dya.data(), gamma.data(), sm.data(),
                               si.data(), dx.data(), dg.data(), db.data());
        ThrowIfError(
            BatchNormTrain(s.B, s.C, s.P, dxin.get(), dgamma.get(), dbeta.get(), eps, momentum,
                           drmean.get(), drvar.get(), dy_out.get(), dsm.get(), dsi.get(), act),
            "train launch");
        ThrowIfError(BatchNormEval(s.B, s.C, s.P, dxin.get(), dgamma.get(), dbeta.get(), eps,
                                   drmean.get(), drvar.get(), deval.get(), act),
                     "eval launch");
        ThrowIfError(
            BatchNormBackward(s.B, s.C, s.P, dxin.get(), ddy.get(), dgamma.get(), dbeta.get(),
                              dsm.get(), dsi.get(), ddx.get(), ddg.get(), ddb.get(), act),
            "backward launch");
        std::string d;
        Compare(&d, "y", y, dy_out);
        Compare(&d, "save_mean", sm, dsm);
        Compare(&d, "save_invstd", si, dsi);
        Compare(&d, "running_mean", rmean, drmean);
        Compare(&d, "running_var", rvar, drvar);
        Compare(&d, "eval y", yeval, deval);
        Compare(&d, "dx", dx, ddx);
        Compare(&d, "dgamma", dg, ddg);
        Compare(&d, "dbeta", db, ddb);
        return d;
      });
    }
  }
  for (auto [rows, cols] :
       {std::pair{16, 10}, std::pair{128, 10}, std::pair{128, 64}, std::pair{3000, 7}}) {
    const std::string shape = " " + std::to_string(rows) + "x" + std::to_string(cols);
    const size_t n = static_cast<size_t>(rows) * cols;
    Run(&out, "SoftmaxCrossEntropy+Argmax" + shape, [&] {
      auto z = Random(n, seed++, /*ties=*/true);
      for (size_t i = 0; i < n; i += 3) z[i] *= 20.0f;  // large logits exercise Exp's range
      PhiloxStream r(DeriveKey(seed++, 3), 0);
      std::vector<int32_t> labels(rows);
      for (int32_t& l : labels) l = static_cast<int32_t>(r.NextBelow(cols));
      std::vector<float> dz(n);
      std::vector<int32_t> arg(rows);
      const std::vector<float> loss = {
          cpu::SoftmaxCrossEntropy(rows, cols, z.data(), labels.data(), dz.data())};
      cpu::Argmax(rows, cols, z.data(), arg.data());
      DeviceBuffer<float> dzin(z), ddz(n), dloss(1);
      DeviceBuffer<int32_t> dlabels(labels), darg(rows);
      ThrowIfError(
          SoftmaxCrossEntropy(rows, cols, dzin.get(), dlabels.get(), ddz.get(), dloss.get()),
          "launch");
      ThrowIfError(Argmax(rows, cols, dzin.get(), darg.get()), "launch");
      std::string d;
      Compare(&d, "loss", loss, dloss);
      Compare(&d, "dlogits", dz, ddz);
      Compare(&d, "argmax", arg, darg);
      return d;
    });
  }
  return out;
}

std::vector<KernelCheck> CheckStepKernels(uint64_t seed) {
  std::vector<KernelCheck> out;
  KernelBackend& cpu = CpuKernelBackend();
  // Eight lanes' passes folded at once, and three sources: two segments each
  // (a gradient and a loss), one source's gradient holding a NaN; and a
  // launch's most segments, of sizes far apart, some empty.
  std::vector<size_t> segments;
  for (int i = 0; i < kMaxFixedPointSegments; ++i)
    segments.push_back(i == 5 ? 300001 : i % 7 == 3 ? 0 : i * 331 % 5000);
  for (const std::vector<size_t>& sizes : {std::vector<size_t>{100003, 1}, segments}) {
    const int count = static_cast<int>(sizes.size());
    for (const int sources : {1, 3, 8}) {
      Run(&out,
          "AccumulateFixedPoint " + std::to_string(sources) + " sources, " + std::to_string(count) +
              " segments",
          [&] {
            std::vector<std::vector<float>> data;
            for (int j = 0; j < sources; ++j) {
              for (size_t size : sizes) data.push_back(Random(size, seed++));
            }
            const size_t largest = std::max_element(sizes.begin(), sizes.end()) - sizes.begin();
            if (sources > 1) data[count + largest][777] = std::numeric_limits<float>::quiet_NaN();
            std::vector<const float*> host_segments;
            for (const auto& d : data) host_segments.push_back(d.data());
            size_t total = 0;
            for (size_t size : sizes) total += size;
            std::vector<int64_t> acc(total, 5);
            std::vector<int32_t> flags(data.size(), 0);
            DeviceBuffer<int64_t> dacc(acc);
            DeviceBuffer<int32_t> dflags(flags);
            cpu.AccumulateFixedPoint(host_segments, sizes, 8, acc.data(), flags.data());
            std::vector<DeviceBuffer<float>> device_data;
            device_data.reserve(data.size());
            std::vector<const float*> device_segments;
            for (const auto& d : data) device_segments.push_back(device_data.emplace_back(d).get());
            ThrowIfError(AccumulateFixedPoint(count, sources, device_segments.data(), sizes.data(),
                                              8, dacc.get(), dflags.get(), count),
                         "launch");
            std::string d;
            Compare(&d, "sums", acc, dacc);
            Compare(&d, "flags", flags, dflags);
            return d;
          });
    }
  }
  // A step's update over parameters laid out as `sizes` (one part each, end
  // to end in one buffer): a single one, and more parts than one launch takes
  // (kMaxParamParts), some empty.
  std::vector<std::vector<size_t>> layouts = {{1}, {1000}, {size_t{1} << 20}};
  std::vector<size_t>& many = layouts.emplace_back();
  for (size_t i = 0; i < kMaxParamParts + 9; ++i) many.push_back(i % 7 == 3 ? 0 : i * 331 % 5000);
  for (const std::vector<size_t>& sizes : layouts) {
    size_t n = 0;
    for (size_t size : sizes) n += size;
    const std::string layout =
        sizes.size() == 1 ? std::to_string(n)
                          : std::to_string(sizes.size()) + " parts of " + std::to_string(n);
    // Parts over the host's and the device's arrays at the same offsets.
    const auto parts_of = [&](auto&& fill) {
      std::vector<formulas::ParamPart> parts;
      size_t offset = 0;
      for (size_t size : sizes) {
        formulas::ParamPart& part = parts.emplace_back();
        part.n = size;
        fill(part, offset);
        offset += size;
      }
      return parts;
    };
    // From gradients (mean_of 0), and from fixed-point sums of every
    // magnitude (around 2^32: values near 1; tiny ones; beyond 2^51, the
    // host's scalar route) decoded as the update reads them: SGD then has no
    // momentum or decay, so its velocity is the decoded mean itself.
    for (const bool adam : {false, true}) {
      for (const int mean_of : {0, 1, 3, 8}) {
        Run(&out,
            std::string(adam ? "UpdateParams/adam " : "UpdateParams/sgd ") + layout +
                (mean_of > 0 ? " from sums/" + std::to_string(mean_of) : ""),
            [&] {
              formulas::UpdateRule rule{
                  .adam = adam, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f};
              if (adam) rule.c1 = 0.271f, rule.c2_sqrt = 0.0547f;  // step 3's corrections
              rule.mean_of = mean_of;
              if (mean_of > 0 && !adam) rule.momentum = 0.0f, rule.weight_decay = 0.0f;
              auto g = Random(n, seed++);
              auto w = Random(n, seed++), m = Random(n, seed++), v = Random(n, seed++);
              for (float& x : v) x = x * x;  // a second moment is not negative
              const auto r = Random(n, seed++);
              std::vector<int64_t> sums(n);
              for (size_t i = 0; i < n; ++i) {
                const int shift = static_cast<int>(i % 29) * 2;
                sums[i] = static_cast<int64_t>(static_cast<double>(r[i]) * 4294967296.0) *
                          (int64_t{1} << (shift % 24));
              }
              if (n > 2) {
                sums[n / 2] = (int64_t{1} << 60) + 12345;
                sums[1] = -(int64_t{1} << 55) - 7;
              }
              DeviceBuffer<float> dg(g), dw(w), dm(m), dv(v);
              DeviceBuffer<int64_t> dsums(sums);
              const auto host_parts = parts_of([&](formulas::ParamPart& p, size_t o) {
                p.sums = sums.data() + o, p.grad = g.data() + o, p.value = w.data() + o;
                p.state1 = m.data() + o, p.state2 = adam ? v.data() + o : nullptr;
              });
              const auto device_parts = parts_of([&](formulas::ParamPart& p, size_t o) {
                p.sums = dsums.get() + o, p.grad = dg.get() + o, p.value = dw.get() + o;
                p.state1 = dm.get() + o, p.state2 = adam ? dv.get() + o : nullptr;
              });
              for (int step = 0; step < 3; ++step) {
                cpu.UpdateParams(rule, host_parts);
                ThrowIfError(UpdateParams(rule, device_parts.data(), device_parts.size()),
                             "launch");
              }
              std::string d;
              Compare(&d, "value", w, dw);
              Compare(&d, adam ? "m" : "velocity", m, dm);
              if (adam) Compare(&d, "v", v, dv);
              return d;
            });
      }
    }
  }
  return out;
}

}  // namespace easyscale::cuda

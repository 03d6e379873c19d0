// MatMul: numpy's matmul. A is [..., M, K], B is [..., K, N]; the batch
// dimensions broadcast; a 1-D A is [1, K] and a 1-D B is [K, 1], their unit
// dimension dropped from Y.
//
// Operation order (GemmOutput: cpu::Gemm's k order, kernel_formulas.h), per
// output batch t (row-major over Y's batch dimensions), reading A's batch a(t)
// and B's batch b(t):
//   Y_t[i, j] = GemmOutput over k ascending of A[i, k] * B[k, j], from 0.
//   dA_a[i, k] = GemmOutput over j of dY_t[i, j] * B[k, j] for the first t
//                with a(t) = a, from 0; each later such t (ascending) continues
//                the chain: GemmOutput from the sum so far.
//   dB_b[k, j] = the same over the t with b(t) = b of GemmOutput over i of
//                A[i, k] * dY_t[i, j];
//   except where every batch shares one B (a weight): one product over every
//   batch's rows, dB[k, j] = GemmOutput over the rows i ascending of
//   A[i, k] * dY[i, j], from 0, in k blocks of formulas::WeightGradientKBlock.
//
// MatMul+Add (graph/fusion.h's FuseMatMulBiases: a linear layer's MatMul and
// bias Add as one node, inputs A, B 2-D and bias [N], attribute bias_first):
// the MatMul's Y and then the Add's Z = Y + bias (bias + Y with bias_first)
// per element, dZ passed as dY, and d(bias) the Add's gradient rule
// (broadcast.h's order, BinaryReductionBlock's blocks): the same bits as the
// two nodes. On a device the GEMM adds the bias as it stores each output.
//
// Transpose+MatMul and Transpose+MatMul+Add (graph/fusion.h's
// FuseTransposedWeights: a weight's Transpose into the product that alone
// reads it): input B is the 2-D weight as stored, [N, K], whose transpose the
// product reads. The same bits as the two nodes: the forward multiplies the
// transpose; dA's product reads the weight as stored (where the MatMul
// transposed its B back); dB[j, k] = GemmOutput over the rows i of
// dY[i, j] * A[i, k] in the same k blocks, each term the same product as
// A[i, k] * dY[i, j], so dB is the MatMul's gradient transposed, as the
// Transpose's gradient made it.
//
// StridedMatMul (graph/fusion.h's FuseTransposedOperands: the attention's
// head splits and merge): a batched MatMul of rank 3 or 4 whose A is
// Transpose(input 0, perm_a), B Transpose(input 1, perm_b) and output
// Transpose(Y, perm_y), each where the attribute is given, and no batch
// broadcast; shape_a, shape_b and shape_y reshape input 0, input 1 and the
// output in their element order (a Reshape before or after). The MatMul's
// order per output and per gradient element: the CPU gathers the views into
// the MatMul's operands and scatters its results, a GPU reads and writes
// them in place (cuda::GemmBatchedStrided); the Reshapes', Transposes' and
// the MatMul's bits.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

// MatMul+Add's bias: the Add's broadcast (operands in its order) and the
// bias's place in it.
struct RowBias {
  Broadcast bc;
  int operand;    // the bias's: 0 (bias_first) or 1
  int64_t block;  // its gradient's reduction blocks (BinaryReductionBlock)
};

class MatMul final : public Op {
 public:
  // b_transposed: input B is [N, K], its transpose the product's B (rows fold).
  MatMul(int m, int n, int k, std::vector<size_t> a_batch, std::vector<size_t> b_batch,
         Shape out_shape, bool b_transposed)
      : m_(m),
        n_(n),
        k_(k),
        a_batch_(std::move(a_batch)),
        b_batch_(std::move(b_batch)),
        out_shape_(std::move(out_shape)),
        b_transposed_(b_transposed) {}

  // Makes this a MatMul+Add (its products' rows fold: checked by the factory).
  void AddBias(RowBias bias) { bias_ = std::move(bias); }
  bool FoldsIntoRows() const {
    for (size_t t = 0; t < a_batch_.size(); ++t) {
      if (a_batch_[t] != t || b_batch_[t] != 0) return false;
    }
    return true;
  }

  std::vector<ValueInfo> OutputInfos() const override { return {{DType::kFloat32, out_shape_}}; }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, *in[0], *in[1], bias_ ? in[2] : nullptr, *out[0]));
    const float* a = in[0]->floats.data();
    const float* b = in[1]->floats.data();
    float* y = out[0]->floats.data();
    const size_t a_size = static_cast<size_t>(m_) * k_, b_size = static_cast<size_t>(k_) * n_;
    const size_t y_size = static_cast<size_t>(m_) * n_;
    const size_t batches = a_batch_.size();
    std::vector<float> b_buf;
    if (b_transposed_) {
      b_buf.resize(b_size);
      cpu::Transpose(n_, k_, b, b_buf.data());
      b = b_buf.data();
    }
    if (FoldsIntoRows()) {
      // One B for consecutive A batches: a single taller product, the same
      // chain for every element.
      cpu::Gemm(static_cast<int>(batches) * m_, n_, k_, a, k_, b, n_, y, n_, false);
      if (bias_) {
        const float* bias = in[2]->floats.data();
        ForEachBroadcast(bias_->bc, [&](int64_t o, int64_t ia, int64_t ib) {
          y[o] = bias_->operand == 1 ? AddFormula::Apply(y[ia], bias[ib])
                                     : AddFormula::Apply(bias[ia], y[ib]);
        });
      }
      return;
    }
    for (size_t t = 0; t < batches; ++t) {
      cpu::Gemm(m_, n_, k_, a + a_batch_[t] * a_size, k_, b + b_batch_[t] * b_size, n_,
                y + t * y_size, n_, false);
    }
  }

  bool HasGradient(size_t i) const override { return i <= (bias_ ? 2u : 1u); }
  bool BackwardReadsInput(size_t i) const override { return i <= 1; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>&, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (dout[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, *in[0], *in[1], *dout[0], din));
    if (bias_ && din[2] != nullptr) {
      const std::vector<float>& dz = dout[0]->floats;
      ReduceToOperand(
          bias_->bc, bias_->operand, [&](int64_t o, int64_t, int64_t) { return dz[o]; },
          din[2]->floats, bias_->block);
    }
    const float* a = in[0]->floats.data();
    const float* b = in[1]->floats.data();
    const float* dy = dout[0]->floats.data();
    const size_t a_size = static_cast<size_t>(m_) * k_, b_size = static_cast<size_t>(k_) * n_;
    const size_t y_size = static_cast<size_t>(m_) * n_;
    const size_t batches = a_batch_.size();
    std::vector<float> t_buf;
    if (din[0] != nullptr) {
      float* da = din[0]->floats.data();
      std::vector<bool> started(din[0]->floats.size() / a_size, false);
      t_buf.resize(b_transposed_ ? 0 : b_size);
      for (size_t t = 0; t < batches; ++t) {
        const float* bt = b;  // B^T, as stored where b_transposed_ (rows fold: one B)
        if (!b_transposed_) {
          cpu::Transpose(k_, n_, b + b_batch_[t] * b_size, t_buf.data());
          bt = t_buf.data();
        }
        cpu::Gemm(m_, k_, n_, dy + t * y_size, n_, bt, k_, da + a_batch_[t] * a_size, k_,
                  started[a_batch_[t]]);
        started[a_batch_[t]] = true;
      }
    }
    if (din[1] != nullptr && FoldsIntoRows()) {
      // Block by block: each from 0 (cpu::Gemm's one chain), added in order.
      // dB[p, q] = the rows' sum of L[i, p] * R[i, q] (WeightGradientFactors).
      float* db = din[1]->floats.data();
      const int k_block = WeightGradientKBlock(), all_rows = static_cast<int>(batches) * m_;
      const auto [l, r, p_dim, q_dim] = WeightGradientFactors(a, dy);
      std::vector<float> part(all_rows > k_block ? b_size : 0);
      t_buf.resize(static_cast<size_t>(std::min(k_block, all_rows)) * p_dim);
      for (int r0 = 0; r0 < all_rows; r0 += k_block) {
        const int rows = std::min(k_block, all_rows - r0);
        cpu::Transpose(rows, p_dim, l + static_cast<size_t>(r0) * p_dim, t_buf.data());
        float* p = r0 == 0 ? db : part.data();
        cpu::Gemm(p_dim, q_dim, rows, t_buf.data(), rows, r + static_cast<size_t>(r0) * q_dim,
                  q_dim, p, q_dim, false);
        if (r0 > 0) {
          for (size_t e = 0; e < b_size; ++e) db[e] = db[e] + p[e];
        }
      }
    } else if (din[1] != nullptr) {
      float* db = din[1]->floats.data();
      std::vector<bool> started(din[1]->floats.size() / b_size, false);
      t_buf.resize(a_size);
      for (size_t t = 0; t < batches; ++t) {
        cpu::Transpose(m_, k_, a + a_batch_[t] * a_size, t_buf.data());
        cpu::Gemm(k_, n_, m_, t_buf.data(), m_, dy + t * y_size, n_, db + b_batch_[t] * b_size, n_,
                  started[b_batch_[t]]);
        started[b_batch_[t]] = true;
      }
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  // The CPU's products, in as few launches as keep each output's order: one
  // product for all batches where B is shared (rows folded) or one batched
  // launch where no operand broadcasts, else one cuda::Gemm per batch.
  void ForwardOnDevice(RunContext& ctx, const Value& av, const Value& bv, const Value* bias_value,
                       Value& yv) {
    const cudaStream_t st = StreamOf(ctx);
    const float* a = DeviceData(ctx, av);
    const float* b = DeviceData(ctx, bv);
    float* y = DeviceData(ctx, yv);
    const size_t a_size = static_cast<size_t>(m_) * k_, b_size = static_cast<size_t>(k_) * n_;
    const size_t y_size = static_cast<size_t>(m_) * n_;
    const size_t batches = a_batch_.size();
    if (b_transposed_) {  // the transpose in transient scratch slot 0
      float* bt = TransientScratch(ctx, 0, b_size);
      CheckLaunch(cuda::Transpose(n_, k_, b, bt, st), "MatMul");
      b = bt;
    }
    if (FoldsIntoRows()) {
      const int rows = static_cast<int>(batches) * m_;
      CheckLaunch(bias_ ? cuda::GemmBias(rows, n_, k_, a, k_, b, n_, DeviceData(ctx, *bias_value),
                                         y, n_, st)
                        : cuda::Gemm(rows, n_, k_, a, k_, b, n_, y, n_, false, st),
                  "MatMul");
      return;
    }
    if (BatchesInOneLaunch(k_)) {
      CheckLaunch(cuda::GemmBatched(static_cast<int>(batches), m_, n_, k_, a, k_, a_size, b, n_,
                                    b_size, y, n_, y_size, false, st),
                  "MatMul");
      return;
    }
    for (size_t t = 0; t < batches; ++t) {
      CheckLaunch(cuda::Gemm(m_, n_, k_, a + a_batch_[t] * a_size, k_, b + b_batch_[t] * b_size, n_,
                             y + t * y_size, n_, false, st),
                  "MatMul");
    }
  }

  // A's and B's gradients are independent products, neither filling the GPU
  // alone at an encoder's shapes: B's runs on the lane's side stream.
  void BackwardOnDevice(RunContext& ctx, const Value& av, const Value& bv, const Value& dyv,
                        const std::vector<Value*>& din) {
    const float* dy = DeviceData(ctx, dyv);
    const bool bias_wanted = bias_ && din[2] != nullptr;
    // The bias's gradient after A's, beside B's: before them it held both back.
    WeightBesideInput(
        ctx, din[1] != nullptr, din[0] != nullptr || bias_wanted,
        [&](cudaStream_t st) { WeightGradientOnDevice(ctx, DeviceData(ctx, av), dy, *din[1], st); },
        [&] {
          if (din[0] != nullptr) InputGradientOnDevice(ctx, DeviceData(ctx, bv), dy, *din[0]);
          if (bias_wanted) {
            CheckLaunch(cuda_ops::BinaryBackward<AddFormula>(
                            DeviceDims(bias_->bc), bias_->operand, din[2]->size(), nullptr, nullptr,
                            nullptr, dy, DeviceData(ctx, *din[2]), bias_->block, StreamOf(ctx)),
                        "MatMul+Add bias gradient");
          }
        });
  }

  // dA on the pass's stream, B^T (where copied) in transient scratch slot 0.
  void InputGradientOnDevice(RunContext& ctx, const float* b, const float* dy, Value& dav) {
    const cudaStream_t st = StreamOf(ctx);
    const size_t a_size = static_cast<size_t>(m_) * k_, b_size = static_cast<size_t>(k_) * n_;
    const size_t y_size = static_cast<size_t>(m_) * n_;
    const int batches = static_cast<int>(a_batch_.size());
    float* da = DeviceData(ctx, dav);
    if (FoldsIntoRows()) {
      // Every batch's rows of dA against the one B^T: a single product.
      const float* bt = b;  // as stored where b_transposed_
      if (!b_transposed_) {
        float* copy = TransientScratch(ctx, 0, b_size);
        CheckLaunch(cuda::Transpose(k_, n_, b, copy, st), "MatMul gradient");
        bt = copy;
      }
      CheckLaunch(cuda::Gemm(batches * m_, k_, n_, dy, n_, bt, k_, da, k_, false, st),
                  "MatMul gradient");
    } else if (BatchesInOneLaunch(n_)) {
      // dA = dY B^T, each B read as stored (no transposed copy).
      CheckLaunch(cuda::GemmBatchedTransposed(batches, m_, k_, n_, dy, n_, y_size, false, b, n_,
                                              b_size, true, da, k_, a_size, false, st),
                  "MatMul gradient");
    } else {
      float* t_buf = TransientScratch(ctx, 0, b_size);
      std::vector<bool> started(dav.size() / a_size, false);
      for (int t = 0; t < batches; ++t) {
        CheckLaunch(cuda::Transpose(k_, n_, b + b_batch_[t] * b_size, t_buf, st),
                    "MatMul gradient");
        CheckLaunch(cuda::Gemm(m_, k_, n_, dy + t * y_size, n_, t_buf, k_,
                               da + a_batch_[t] * a_size, k_, started[a_batch_[t]], st),
                    "MatMul gradient");
        started[a_batch_[t]] = true;
      }
    }
  }

  // dB on stream `st`, A^T (where copied) in transient scratch slot 1 (slot 0 is dA's) and
  // partial sums in slot 2.
  void WeightGradientOnDevice(RunContext& ctx, const float* a, const float* dy, Value& dbv,
                              cudaStream_t st) {
    const size_t a_size = static_cast<size_t>(m_) * k_, b_size = static_cast<size_t>(k_) * n_;
    const size_t y_size = static_cast<size_t>(m_) * n_;
    const int batches = static_cast<int>(a_batch_.size());
    float* db = DeviceData(ctx, dbv);
    if (FoldsIntoRows()) {
      // Every batch's rows transposed at once, then one product in
      // kGemmKBlock blocks, or a weight gradient's blocks (whole batches,
      // all alike) side by side in one batched launch into partial sums
      // added in order. The one product has few tiles and long chains: the
      // tiled kernel in tiles small enough to fill the GPU; cuda::Gemm for
      // products thinner than half a tile.
      const int k_block = WeightGradientKBlock(), all_rows = batches * m_;
      const auto [l, r, p, q] = WeightGradientFactors(a, dy);
      if (k_block == formulas::kGemmKBlock) {
        float* lt = TransientScratch(ctx, 1, static_cast<size_t>(all_rows) * p);
        CheckLaunch(cuda::Transpose(all_rows, p, l, lt, st), "MatMul gradient");
        const auto product =
            p >= kTiledMinSide && q >= kTiledMinSide ? &cuda::GemmFillTiles : &cuda::Gemm;
        CheckLaunch(product(p, q, all_rows, lt, all_rows, r, q, db, q, false, st),
                    "MatMul gradient");
      } else {
        // Block z: L's rows z * k_block ... read as L^T where they are stored.
        const int blocks = all_rows / k_block;
        float* parts = TransientScratch(ctx, 2, blocks * b_size);
        CheckLaunch(cuda::GemmBatchedTransposed(
                        blocks, p, q, k_block, l, p, static_cast<size_t>(k_block) * p, true, r, q,
                        static_cast<size_t>(k_block) * q, false, parts, q, b_size, false, st),
                    "MatMul gradient");
        CheckLaunch(cuda::SumParts(p, q, blocks, parts, db, q, st), "MatMul gradient");
      }
    } else if (BatchesInOneLaunch(m_)) {
      // dB = A^T dY, each A read as stored (no transposed copy).
      CheckLaunch(cuda::GemmBatchedTransposed(batches, k_, n_, m_, a, k_, a_size, true, dy, n_,
                                              y_size, false, db, n_, b_size, false, st),
                  "MatMul gradient");
    } else {
      float* t_buf = TransientScratch(ctx, 1, a_size);
      std::vector<bool> started(dbv.size() / b_size, false);
      for (int t = 0; t < batches; ++t) {
        CheckLaunch(cuda::Transpose(m_, k_, a + a_batch_[t] * a_size, t_buf, st),
                    "MatMul gradient");
        CheckLaunch(cuda::Gemm(k_, n_, m_, t_buf, m_, dy + t * y_size, n_,
                               db + b_batch_[t] * b_size, n_, started[b_batch_[t]], st),
                    "MatMul gradient");
        started[b_batch_[t]] = true;
      }
    }
  }

  static constexpr int kTiledMinSide = 64;  // half of cuda::GemmTiled's 128x128 tile

  // No operand broadcasts (batch t reads A's and B's batch t), and the
  // products' K fits one launch of cuda::GemmBatched.
  bool BatchesInOneLaunch(int k) const {
    if (k > formulas::kGemmKBlock || a_batch_.size() > 65535) return false;
    for (size_t t = 0; t < a_batch_.size(); ++t) {
      if (a_batch_[t] != t || b_batch_[t] != t) return false;
    }
    return true;
  }
#endif

  // B's gradient where rows fold, as one product over the rows i:
  // dB[p, q] = the sum of L[i, p] * R[i, q]; L = A and R = dY (dB is [K, N]),
  // or where B is stored transposed, L = dY and R = A (dB is [N, K]).
  struct WeightGradientProduct {
    const float* l;
    const float* r;
    int p, q;  // L's and R's columns
  };
  WeightGradientProduct WeightGradientFactors(const float* a, const float* dy) const {
    return b_transposed_ ? WeightGradientProduct{dy, a, n_, k_}
                         : WeightGradientProduct{a, dy, k_, n_};
  }

  // The k block of B's gradient where rows fold (batches of m_ rows).
  int WeightGradientKBlock() const {
    return formulas::WeightGradientKBlock(static_cast<int64_t>(a_batch_.size()), m_, k_, n_);
  }

  int m_, n_, k_;
  std::vector<size_t> a_batch_, b_batch_;  // by output batch: the operands' batch index
  Shape out_shape_;
  bool b_transposed_;
  std::optional<RowBias> bias_;
};

// A batched matrix inside a tensor's elements: the view's shape
// [batch..., rows, cols] and, per view dimension, its step in the tensor.
struct MatrixView {
  Shape shape;
  std::vector<int64_t> strides;

  int64_t rows() const { return shape[shape.size() - 2]; }
  int64_t cols() const { return shape.back(); }
  int64_t row_step() const { return strides[strides.size() - 2]; }
  int64_t col_step() const { return strides.back(); }
  // The same elements as the transposed matrices.
  MatrixView Transposed() const {
    MatrixView t = *this;
    std::swap(t.shape[t.shape.size() - 2], t.shape.back());
    std::swap(t.strides[t.strides.size() - 2], t.strides.back());
    return t;
  }
};

// A copy of `view`'s elements of `src`, in the view's row-major order.
Value Gather(const Value& src, const MatrixView& view) {
  Value v;
  v.Reset(DType::kFloat32, view.shape);
  ForEachStrided(view.shape, 0, view.strides,
                 [&](int64_t dst, int64_t from) { v.floats[dst] = src.floats[from]; });
  return v;
}

// Writes `v`'s elements to their places of `view` in `dst`.
void Scatter(const Value& v, const MatrixView& view, Value& dst) {
  ForEachStrided(view.shape, 0, view.strides,
                 [&](int64_t from, int64_t to) { dst.floats[to] = v.floats[from]; });
}

class StridedMatMul final : public Op {
 public:
  // product: the MatMul of the views' shapes; out_shape: the node's output
  // (Y's shape, or its transpose's).
  StridedMatMul(std::unique_ptr<MatMul> product, MatrixView a, MatrixView b, MatrixView y,
                Shape out_shape)
      : product_(std::move(product)),
        a_(std::move(a)),
        b_(std::move(b)),
        y_(std::move(y)),
        out_shape_(std::move(out_shape)) {}

  std::vector<ValueInfo> OutputInfos() const override { return {{DType::kFloat32, out_shape_}}; }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx,
                     ProductOnDevice({DeviceData(ctx, *in[0]), a_}, {DeviceData(ctx, *in[1]), b_},
                                     {DeviceData(ctx, *out[0]), y_}, StreamOf(ctx)));
    const Value a = Gather(*in[0], a_), b = Gather(*in[1], b_);
    Value y;
    y.Reset(DType::kFloat32, y_.shape);
    product_->Forward(ctx, {&a, &b}, {&y});
    Scatter(y, y_, *out[0]);
  }

  bool HasGradient(size_t i) const override { return i <= 1; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>&, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (dout[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, *in[0], *in[1], *dout[0], din));
    const Value a = Gather(*in[0], a_), b = Gather(*in[1], b_), dy = Gather(*dout[0], y_);
    Value da, db;
    if (din[0] != nullptr) da.Reset(DType::kFloat32, a_.shape);
    if (din[1] != nullptr) db.Reset(DType::kFloat32, b_.shape);
    product_->Backward(ctx, {&a, &b}, {}, {&dy},
                       {din[0] != nullptr ? &da : nullptr, din[1] != nullptr ? &db : nullptr});
    if (din[0] != nullptr) Scatter(da, a_, *din[0]);
    if (din[1] != nullptr) Scatter(db, b_, *din[1]);
  }

  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  struct Operand {
    float* data;
    MatrixView view;
  };

  // C = A B over the batch, each output's chain the MatMul's: C's rows as
  // stored, or the product transposed (C^T = B^T A^T: the same terms in the
  // same order) where C's columns are not.
  static void ProductOnDevice(Operand a, Operand b, Operand c, cudaStream_t st) {
    for (Operand* o : {&a, &b, &c}) o->view = Stepped(o->view);
    if (c.view.col_step() != 1) {
      return ProductOnDevice({b.data, b.view.Transposed()}, {a.data, a.view.Transposed()},
                             {c.data, c.view.Transposed()}, st);
    }
    const size_t rank = c.view.shape.size();
    cuda::GemmBatchStrides strides;
    strides.inner = rank == 4 ? static_cast<int>(c.view.shape[1]) : 1;
    strides.a = static_cast<size_t>(a.view.strides[0]);
    strides.b = static_cast<size_t>(b.view.strides[0]);
    strides.c = static_cast<size_t>(c.view.strides[0]);
    if (rank == 4) {
      strides.a_inner = static_cast<size_t>(a.view.strides[1]);
      strides.b_inner = static_cast<size_t>(b.view.strides[1]);
      strides.c_inner = static_cast<size_t>(c.view.strides[1]);
    }
    // Each operand's rows as stored (unit column step), or stored transposed.
    const bool a_t = a.view.col_step() != 1, b_t = b.view.col_step() != 1;
    // Whole groups a launch, at most kMaxBatch entries (a grid's z).
    const int64_t groups = c.view.shape[0];
    const int64_t per_launch = std::max<int64_t>(1, kMaxBatch / strides.inner);
    for (int64_t g0 = 0; g0 < groups; g0 += per_launch) {
      const int64_t count = std::min(per_launch, groups - g0);
      CheckLaunch(
          cuda::GemmBatchedStrided(static_cast<int>(count * strides.inner),
                                   static_cast<int>(c.view.rows()), static_cast<int>(c.view.cols()),
                                   static_cast<int>(a.view.cols()), a.data + g0 * strides.a,
                                   static_cast<int>(a_t ? a.view.col_step() : a.view.row_step()),
                                   a_t, b.data + g0 * strides.b,
                                   static_cast<int>(b_t ? b.view.col_step() : b.view.row_step()),
                                   b_t, c.data + g0 * strides.c,
                                   static_cast<int>(c.view.row_step()), strides, false, st),
          "StridedMatMul");
    }
  }
  static constexpr int64_t kMaxBatch = 65535;  // cuda::GemmBatchedStrided's batch

  // `view` with the steps of its dimensions of one element as a contiguous
  // matrix's: a view may give them any step (a transposed [K, 1] matrix's
  // single row steps by 1), which the GEMM would read as leading dimensions.
  static MatrixView Stepped(MatrixView view) {
    const size_t rank = view.shape.size();
    if (view.cols() == 1) view.strides[rank - 1] = 1;
    if (view.rows() == 1) view.strides[rank - 2] = view.cols() * view.col_step();
    return view;
  }

  // dA = dY B^T beside dB = A^T dY, each written to its view.
  void BackwardOnDevice(RunContext& ctx, const Value& av, const Value& bv, const Value& dyv,
                        const std::vector<Value*>& din) {
    const Operand dy{DeviceData(ctx, dyv), y_};
    WeightBesideInput(
        ctx, din[1] != nullptr, din[0] != nullptr,
        [&](cudaStream_t st) {
          ProductOnDevice({DeviceData(ctx, av), a_.Transposed()}, dy,
                          {DeviceData(ctx, *din[1]), b_}, st);
        },
        [&] {
          ProductOnDevice(dy, {DeviceData(ctx, bv), b_.Transposed()},
                          {DeviceData(ctx, *din[0]), a_}, StreamOf(ctx));
        });
  }
#endif

  std::unique_ptr<MatMul> product_;
  MatrixView a_, b_, y_;
  Shape out_shape_;
};

}  // namespace

namespace {

// The product of inputs A and B, or with b_transposed of A and B's transpose
// (the arity checked by the caller).
StatusOr<std::unique_ptr<MatMul>> MakeProduct(const Node& node, const std::vector<OpInput>& inputs,
                                              bool b_transposed) {
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "A", DType::kFloat32));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 1, "B", DType::kFloat32));
  Shape a = inputs[0].info->shape, b = inputs[1].info->shape;
  if (a.empty() || b.empty()) return NodeError(node, "inputs A and B must be at least 1-D");
  if (b_transposed) {
    if (b.size() != 2) {
      return NodeError(node, absl::StrCat("input B must be 2-D (a weight read transposed), has ",
                                          ShapeString(b)));
    }
    std::swap(b[0], b[1]);
  }
  const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (m < 1 || k < 1 || n < 1) return NodeError(node, "inputs A and B have an empty dimension");
  if (b[b.size() - 2] != k) {
    return NodeError(node,
                     absl::StrCat("inputs A and B disagree on K: ", k, " and ", b[b.size() - 2]));
  }
  // Batch dimensions, right-aligned, broadcast where one side is 1 or missing.
  const size_t ra = a.size() - 2, rb = b.size() - 2, r = std::max(ra, rb);
  Shape batch(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i + ra >= r ? a[i + ra - r] : 1, db = i + rb >= r ? b[i + rb - r] : 1;
    if (da != db && da != 1 && db != 1) {
      return NodeError(node, absl::StrCat("inputs A and B have batch dimensions that do not "
                                          "broadcast: ",
                                          da, " and ", db));
    }
    batch[i] = std::max(da, db);
  }
  const int64_t count = NumElements(batch);
  std::vector<size_t> a_batch(count), b_batch(count);
  for (int64_t t = 0; t < count; ++t) {
    // t's index per dimension, mapped to each operand's (0 where it broadcasts).
    int64_t rest = t;
    size_t ai = 0, bi = 0, a_stride = 1, b_stride = 1;
    for (size_t i = r; i-- > 0;) {
      const int64_t idx = rest % batch[i];
      rest /= batch[i];
      if (i + ra >= r) {
        const int64_t d = a[i + ra - r];
        ai += (d == 1 ? 0 : idx) * a_stride;
        a_stride *= d;
      }
      if (i + rb >= r) {
        const int64_t d = b[i + rb - r];
        bi += (d == 1 ? 0 : idx) * b_stride;
        b_stride *= d;
      }
    }
    a_batch[t] = ai;
    b_batch[t] = bi;
  }
  Shape out = batch;
  if (!a_vector) out.push_back(m);
  if (!b_vector) out.push_back(n);
  return std::make_unique<MatMul>(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                                  std::move(a_batch), std::move(b_batch), std::move(out),
                                  b_transposed);
}

// MatMul+Add and Transpose+MatMul+Add: the product and its bias input.
StatusOr<std::unique_ptr<Op>> MakeBiasedProduct(const Node& node,
                                                const std::vector<OpInput>& inputs,
                                                bool b_transposed) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 3, 3, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 2, "bias", DType::kFloat32));
  ES_ASSIGN_OR_RETURN(std::unique_ptr<MatMul> product, MakeProduct(node, inputs, b_transposed));
  const Shape y = product->OutputInfos()[0].shape;
  if (!product->FoldsIntoRows() || inputs[1].info->shape.size() != 2 || y.size() < 2) {
    return NodeError(node, "input B must be 2-D and A at least 2-D");
  }
  const Shape& bias = inputs[2].info->shape;
  if (bias != Shape{y.back()}) {
    return NodeError(
        node, absl::StrCat("input bias must have shape [", y.back(), "], has ", ShapeString(bias)));
  }
  ES_ASSIGN_OR_RETURN(int64_t bias_first, node.Get<int64_t>("bias_first", 0));
  const int operand = bias_first != 0 ? 0 : 1;
  ES_ASSIGN_OR_RETURN(Broadcast bc,
                      operand == 1 ? MakeBroadcast(node, y, bias) : MakeBroadcast(node, bias, y));
  const int64_t block = BinaryReductionBlock(bc, operand);
  product->AddBias(RowBias{std::move(bc), operand, block});
  return std::unique_ptr<Op>(std::move(product));
}

// The view of a tensor of `shape` as Transpose(tensor, attribute `attr`), or
// as stored where the attribute is absent.
StatusOr<MatrixView> PermutedView(const Node& node, const std::string& attr, const Shape& shape) {
  ES_ASSIGN_OR_RETURN(const std::vector<int64_t> perm,
                      node.Get<std::vector<int64_t>>(attr, std::vector<int64_t>{}));
  const std::vector<int64_t> steps = Strides(shape);
  if (perm.empty()) return MatrixView{shape, steps};
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> seen(shape.size(), false);
  if (static_cast<int64_t>(perm.size()) != rank) {
    return NodeError(node, absl::StrCat("attribute ", attr, " has ", perm.size(),
                                        " entries for a tensor of rank ", rank));
  }
  MatrixView view;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      return NodeError(node,
                       absl::StrCat("attribute ", attr, " is not a permutation of 0..", rank - 1));
    }
    seen[p] = true;
    view.shape.push_back(shape[p]);
    view.strides.push_back(steps[p]);
  }
  return view;
}

// The shape attribute `attr` (a Reshape's output, in the same element
// order as `shape`), or `shape` where it is absent.
StatusOr<Shape> ReshapedAs(const Node& node, const std::string& attr, const Shape& shape,
                           const char* what) {
  ES_ASSIGN_OR_RETURN(const std::vector<int64_t> dims,
                      node.Get<std::vector<int64_t>>(attr, std::vector<int64_t>{}));
  if (dims.empty()) return shape;
  const Shape reshaped(dims.begin(), dims.end());
  if (std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; }) ||
      NumElements(reshaped) != NumElements(shape)) {
    return NodeError(
        node, absl::StrCat("attribute ", attr, " ", ShapeString(reshaped), " does not hold the ",
                           NumElements(shape), " elements of ", what, " ", ShapeString(shape)));
  }
  return reshaped;
}

// Whether a GEMM reads the view's matrices as stored: rows or columns one
// element apart.
bool HasUnitStep(const MatrixView& v) { return v.col_step() == 1 || v.row_step() == 1; }

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeMatMul(const Node& node, int64_t,
                                         const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 2, 2, 1));
  ES_ASSIGN_OR_RETURN(std::unique_ptr<MatMul> product, MakeProduct(node, inputs, false));
  return std::unique_ptr<Op>(std::move(product));
}

StatusOr<std::unique_ptr<Op>> MakeTransposeMatMul(const Node& node, int64_t,
                                                  const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 2, 2, 1));
  ES_ASSIGN_OR_RETURN(std::unique_ptr<MatMul> product, MakeProduct(node, inputs, true));
  return std::unique_ptr<Op>(std::move(product));
}

StatusOr<std::unique_ptr<Op>> MakeMatMulAdd(const Node& node, int64_t,
                                            const std::vector<OpInput>& inputs) {
  return MakeBiasedProduct(node, inputs, false);
}

StatusOr<std::unique_ptr<Op>> MakeTransposeMatMulAdd(const Node& node, int64_t,
                                                     const std::vector<OpInput>& inputs) {
  return MakeBiasedProduct(node, inputs, true);
}

StatusOr<std::unique_ptr<Op>> MakeStridedMatMul(const Node& node, int64_t,
                                                const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 2, 2, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "A", DType::kFloat32));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 1, "B", DType::kFloat32));
  ES_ASSIGN_OR_RETURN(const Shape a_shape,
                      ReshapedAs(node, "shape_a", inputs[0].info->shape, "input A"));
  ES_ASSIGN_OR_RETURN(const Shape b_shape,
                      ReshapedAs(node, "shape_b", inputs[1].info->shape, "input B"));
  ES_ASSIGN_OR_RETURN(const MatrixView a, PermutedView(node, "perm_a", a_shape));
  ES_ASSIGN_OR_RETURN(const MatrixView b, PermutedView(node, "perm_b", b_shape));
  const size_t rank = a.shape.size();
  if (rank < 3 || rank > 4 || b.shape.size() != rank) {
    return NodeError(node, absl::StrCat("the views of inputs A and B must both have rank 3 or 4, "
                                        "have ",
                                        ShapeString(a.shape), " and ", ShapeString(b.shape)));
  }
  if (!std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())) {
    return NodeError(node, absl::StrCat("the views of inputs A and B must have the same batch "
                                        "dimensions, have ",
                                        ShapeString(a.shape), " and ", ShapeString(b.shape)));
  }
  if (!HasUnitStep(a) || !HasUnitStep(b)) {
    return NodeError(node,
                     "the view of input A or B moves the tensor's last dimension into its "
                     "batch dimensions");
  }
  const ValueInfo a_info{DType::kFloat32, a.shape}, b_info{DType::kFloat32, b.shape};
  ES_ASSIGN_OR_RETURN(std::unique_ptr<MatMul> product,
                      MakeProduct(node, {OpInput{&a_info}, OpInput{&b_info}}, false));
  // Y's view inside the output Transpose(Y, perm_y): Y's dimension d is the
  // output's dimension j where perm_y[j] = d.
  const Shape y = product->OutputInfos()[0].shape;
  ES_ASSIGN_OR_RETURN(const MatrixView placed, PermutedView(node, "perm_y", y));
  MatrixView y_view{y, std::vector<int64_t>(rank)};
  const std::vector<int64_t> out_steps = Strides(placed.shape);
  ES_ASSIGN_OR_RETURN(const std::vector<int64_t> perm_y,
                      node.Get<std::vector<int64_t>>("perm_y", std::vector<int64_t>{}));
  for (size_t j = 0; j < rank; ++j) {
    y_view.strides[perm_y.empty() ? j : static_cast<size_t>(perm_y[j])] = out_steps[j];
  }
  if (!HasUnitStep(y_view)) {
    return NodeError(node,
                     "attribute perm_y moves the product's rows and columns into the "
                     "output's last dimension's place");
  }
  ES_ASSIGN_OR_RETURN(Shape out_shape, ReshapedAs(node, "shape_y", placed.shape, "the output"));
  return std::unique_ptr<Op>(std::make_unique<StridedMatMul>(
      std::move(product), a, b, std::move(y_view), std::move(out_shape)));
}

}  // namespace easyscale::graph

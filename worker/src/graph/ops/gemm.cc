// Gemm: Y = alpha * A' B' + beta * C, A' = transA ? A^T : A (M x K),
// B' = transB ? B^T : B (K x N), C unidirectionally broadcast to [M, N].
//
// Operation order (GemmOutput: cpu::Gemm's k order, kernel_formulas.h):
//   Y[i, j]  = alpha * P[i, j] + beta * C[i, j], P[i, j] = GemmOutput over k
//              ascending of A'[i, k] * B'[k, j] from 0 (no fma in the last step;
//              without C, Y = alpha * P).
//   With G = alpha * dY:
//   dA'[i, k] = GemmOutput over j of G[i, j] * B'[k, j];
//   dB'[k, j] = GemmOutput over i of A'[i, k] * G[i, j];  (dA, dB transposed back)
//   dC[c]    = beta * (the sum from 0 of dY[i, j] over the (i, j) that read C
//              element c, in row-major order of Y).
#include <utility>
#include <vector>

#include "easyscale/worker/cpu_kernels.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class Gemm final : public Op {
 public:
  Gemm(int m, int n, int k, bool trans_a, bool trans_b, float alpha, float beta, bool has_c,
       Shape c_shape)
      : m_(m),
        n_(n),
        k_(k),
        trans_a_(trans_a),
        trans_b_(trans_b),
        alpha_(alpha),
        beta_(beta),
        has_c_(has_c),
        c_shape_(std::move(c_shape)) {
    // C broadcast from the right: a dimension of 1 (or a missing one) repeats.
    const size_t r = c_shape_.size();
    c_row_step_ = r == 2 && c_shape_[0] != 1 ? static_cast<size_t>(c_shape_[1]) : 0;
    c_col_step_ = r >= 1 && c_shape_[r - 1] != 1 ? 1 : 0;
  }

  std::vector<ValueInfo> OutputInfos() const override { return {{DType::kFloat32, {m_, n_}}}; }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, in, *out[0]));
    const float* a = Operand(in[0]->floats, trans_a_, k_, m_, &a_t_);
    const float* b = Operand(in[1]->floats, trans_b_, n_, k_, &b_t_);
    float* y = out[0]->floats.data();
    cpu::Gemm(m_, n_, k_, a, k_, b, n_, y, n_, false);
    const float* c = has_c_ ? in[2]->floats.data() : nullptr;
    for (int i = 0; i < m_; ++i) {
      for (int j = 0; j < n_; ++j) {
        float& v = y[static_cast<size_t>(i) * n_ + j];
        v = c != nullptr ? alpha_ * v + beta_ * c[CIndex(i, j)] : alpha_ * v;
      }
    }
  }

  bool HasGradient(size_t i) const override { return i <= 2; }
  bool BackwardReadsInput(size_t i) const override { return i <= 1; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>&, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (dout[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, in, *dout[0], din));
    const std::vector<float>& dy = dout[0]->floats;
    std::vector<float> g(dy.size()), t;
    for (size_t e = 0; e < dy.size(); ++e) g[e] = alpha_ * dy[e];
    if (din[0] != nullptr) {
      // dA' = G B'^T; B'^T is B as stored when transB.
      const float* bt = trans_b_ ? in[1]->floats.data() : Transposed(in[1]->floats, k_, n_, &t);
      float* da = din[0]->floats.data();
      if (trans_a_) {
        std::vector<float> d(static_cast<size_t>(m_) * k_);
        cpu::Gemm(m_, k_, n_, g.data(), n_, bt, k_, d.data(), k_, false);
        cpu::Transpose(m_, k_, d.data(), da);
      } else {
        cpu::Gemm(m_, k_, n_, g.data(), n_, bt, k_, da, k_, false);
      }
    }
    if (din[1] != nullptr) {
      // dB' = A'^T G; A'^T is A as stored when transA.
      const float* at = trans_a_ ? in[0]->floats.data() : Transposed(in[0]->floats, m_, k_, &t);
      float* db = din[1]->floats.data();
      if (trans_b_) {
        std::vector<float> d(static_cast<size_t>(k_) * n_);
        cpu::Gemm(k_, n_, m_, at, m_, g.data(), n_, d.data(), n_, false);
        cpu::Transpose(k_, n_, d.data(), db);
      } else {
        cpu::Gemm(k_, n_, m_, at, m_, g.data(), n_, db, n_, false);
      }
    }
    if (has_c_ && din[2] != nullptr) {
      std::vector<float>& dc = din[2]->floats;
      for (int i = 0; i < m_; ++i) {
        for (int j = 0; j < n_; ++j) dc[CIndex(i, j)] += dy[static_cast<size_t>(i) * n_ + j];
      }
      for (float& v : dc) v = beta_ * v;
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void ForwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in, Value& out) {
    const cudaStream_t st = StreamOf(ctx);
    const float* a = DeviceData(ctx, *in[0]);
    const float* b = DeviceData(ctx, *in[1]);
    if (trans_a_) a = DeviceTransposed(ctx, a, k_, m_, a_dev_);
    if (trans_b_) b = DeviceTransposed(ctx, b, n_, k_, b_dev_);
    float* y = DeviceData(ctx, out);
    CheckLaunch(cuda::Gemm(m_, n_, k_, a, k_, b, n_, y, n_, false, st), "Gemm");
    CheckLaunch(
        cuda_ops::GemmEpilogue(m_, n_, alpha_, beta_, has_c_ ? DeviceData(ctx, *in[2]) : nullptr,
                               c_row_step_, c_col_step_, y, st),
        "Gemm epilogue");
  }

  void BackwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in, const Value& dy,
                        const std::vector<Value*>& din) {
    const cudaStream_t st = StreamOf(ctx);
    float* g = DeviceScratch(ctx, g_dev_, dy.size());
    CheckLaunch(cuda_ops::Scale(dy.size(), alpha_, DeviceData(ctx, dy), g, st), "Gemm gradient");
    if (din[0] != nullptr) {
      const float* b = DeviceData(ctx, *in[1]);
      const float* bt = trans_b_ ? b : DeviceTransposed(ctx, b, k_, n_, b_dev_);
      float* da = DeviceData(ctx, *din[0]);
      float* d = trans_a_ ? DeviceScratch(ctx, d_dev_, static_cast<size_t>(m_) * k_) : da;
      CheckLaunch(cuda::Gemm(m_, k_, n_, g, n_, bt, k_, d, k_, false, st), "Gemm gradient");
      if (trans_a_) CheckLaunch(cuda::Transpose(m_, k_, d, da, st), "Gemm gradient");
    }
    if (din[1] != nullptr) {
      const float* a = DeviceData(ctx, *in[0]);
      const float* at = trans_a_ ? a : DeviceTransposed(ctx, a, m_, k_, a_dev_);
      float* db = DeviceData(ctx, *din[1]);
      float* d = trans_b_ ? DeviceScratch(ctx, d_dev_, static_cast<size_t>(k_) * n_) : db;
      CheckLaunch(cuda::Gemm(k_, n_, m_, at, m_, g, n_, d, n_, false, st), "Gemm gradient");
      if (trans_b_) CheckLaunch(cuda::Transpose(k_, n_, d, db, st), "Gemm gradient");
    }
    if (has_c_ && din[2] != nullptr) {
      CheckLaunch(cuda_ops::GemmBiasGrad(m_, n_, din[2]->size(), beta_, DeviceData(ctx, dy),
                                         c_row_step_, c_col_step_, DeviceData(ctx, *din[2]), st),
                  "Gemm gradient");
    }
  }

  // The transpose of a rows x cols device matrix, in `scratch`.
  static const float* DeviceTransposed(RunContext& ctx, const float* v, int rows, int cols,
                                       DeviceMirror& scratch) {
    float* t = DeviceScratch(ctx, scratch, static_cast<size_t>(rows) * cols);
    CheckLaunch(cuda::Transpose(rows, cols, v, t, StreamOf(ctx)), "Gemm transpose");
    return t;
  }
#endif

  size_t CIndex(int i, int j) const {
    return static_cast<size_t>(i) * c_row_step_ + static_cast<size_t>(j) * c_col_step_;
  }
  // The operand as a row-major matrix: `v` itself, or its transpose (stored
  // rows x cols) in `scratch`.
  static const float* Operand(const std::vector<float>& v, bool trans, int rows, int cols,
                              std::vector<float>* scratch) {
    return trans ? Transposed(v, rows, cols, scratch) : v.data();
  }
  static const float* Transposed(const std::vector<float>& v, int rows, int cols,
                                 std::vector<float>* scratch) {
    scratch->resize(v.size());
    cpu::Transpose(rows, cols, v.data(), scratch->data());
    return scratch->data();
  }

  int m_, n_, k_;
  bool trans_a_, trans_b_;
  float alpha_, beta_;
  bool has_c_;
  Shape c_shape_;
  size_t c_row_step_ = 0, c_col_step_ = 0;
  std::vector<float> a_t_, b_t_;
  DeviceMirror a_dev_, b_dev_, g_dev_,
      d_dev_;  // device scratch: transposes, alpha * dY, dA' or dB'
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeGemm(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 2, 3, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "A", DType::kFloat32));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 1, "B", DType::kFloat32));
  ES_ASSIGN_OR_RETURN(const int64_t trans_a, node.Get<int64_t>("transA", 0));
  ES_ASSIGN_OR_RETURN(const int64_t trans_b, node.Get<int64_t>("transB", 0));
  ES_ASSIGN_OR_RETURN(const float alpha, node.Get<float>("alpha", 1.0f));
  ES_ASSIGN_OR_RETURN(const float beta, node.Get<float>("beta", 1.0f));
  if ((trans_a != 0 && trans_a != 1) || (trans_b != 0 && trans_b != 1)) {
    return NodeError(node, "attributes transA and transB must be 0 or 1");
  }
  const Shape& a = inputs[0].info->shape;
  const Shape& b = inputs[1].info->shape;
  if (a.size() != 2) return NodeError(node, "input A must be 2-D");
  if (b.size() != 2) return NodeError(node, "input B must be 2-D");
  const int64_t m = trans_a ? a[1] : a[0], k = trans_a ? a[0] : a[1];
  const int64_t kb = trans_b ? b[1] : b[0], n = trans_b ? b[0] : b[1];
  if (k != kb) {
    return NodeError(node, absl::StrCat("inputs A and B disagree on K: ", k, " and ", kb));
  }
  const bool has_c = inputs.size() > 2 && inputs[2].info != nullptr;
  Shape c;
  if (has_c) {
    ES_RETURN_IF_ERROR(CheckDType(node, inputs, 2, "C", DType::kFloat32));
    c = inputs[2].info->shape;
    const bool fits = c.size() <= 2 && (c.empty() || c.back() == 1 || c.back() == n) &&
                      (c.size() < 2 || c[0] == 1 || c[0] == m);
    if (!fits) {
      return NodeError(node, absl::StrCat("input C does not broadcast to [", m, ", ", n, "]"));
    }
  }
  return std::unique_ptr<Op>(new Gemm(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                                      trans_a != 0, trans_b != 0, alpha, beta, has_c,
                                      std::move(c)));
}

}  // namespace easyscale::graph

#include "easyscale/worker/model.h"

#include <cmath>

#include "easyscale/common/checks.h"
#include "easyscale/worker/philox.h"
#include "graph/graph_model.h"

namespace easyscale {
namespace {

// The built-in models: layers one after another.
class SequentialModel : public Model {
 public:
  SequentialModel(std::vector<std::unique_ptr<Layer>> layers);
  void InitParams(uint64_t seed) override;
  const Tensor& Forward(const Tensor& x, LayerContext& ctx) override;
  void Backward(const Tensor& dlogits, LayerContext& ctx) override;
  std::vector<Tensor> InitialBuffers() const override;
  std::vector<std::string> BufferNames() const override;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Tensor> acts_;   // acts_[i] = output of layer i
  std::vector<Tensor> grads_;  // grads_[i] = gradient w.r.t. the input of layer i+1
  size_t first_trainable_ = 0;
};

SequentialModel::SequentialModel(std::vector<std::unique_ptr<Layer>> layers)
    : layers_(std::move(layers)) {
  size_t buffer_offset = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->set_buffer_offset(buffer_offset);
    buffer_offset += layers_[i]->InitialBuffers().size();
    // Named as the same layers in a torch.nn.Sequential: "<index>.<name>".
    for (Param* p : layers_[i]->Params()) {
      p->name = absl::StrCat(i, ".", p->name);
      params_.push_back(p);
    }
  }
  for (first_trainable_ = 0; first_trainable_ < layers_.size(); ++first_trainable_) {
    if (!layers_[first_trainable_]->Params().empty()) break;
  }
  acts_.resize(layers_.size());
  grads_.resize(layers_.size());
}

void SequentialModel::InitParams(uint64_t seed) {
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = *params_[i];
    if (p.fan_in == 0) {
      std::fill(p.value.data.begin(), p.value.data.end(), p.init_constant);
      continue;
    }
    // PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for biases,
    // Kaiming-uniform with a = sqrt(5) (the same bound) for weights.
    const float bound = 1.0f / std::sqrt(static_cast<float>(p.fan_in));
    PhiloxStream rng(DeriveKey(seed, 0x1000 + i), 0);
    for (float& v : p.value.data) v = (2.0f * rng.NextUniform() - 1.0f) * bound;
  }
}

const Tensor& SequentialModel::Forward(const Tensor& x, LayerContext& ctx) {
  const Tensor* in = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->Forward(*in, &acts_[i], ctx);
    in = &acts_[i];
  }
  return *in;
}

void SequentialModel::Backward(const Tensor& dlogits, LayerContext& ctx) {
  // Layers before the first one with parameters need no gradient at all.
  const Tensor* dy = &dlogits;
  for (size_t i = layers_.size(); i-- > first_trainable_;) {
    Tensor* dx = i == first_trainable_ ? nullptr : &grads_[i - 1];
    layers_[i]->Backward(*dy, dx, ctx);
    dy = dx;
  }
}

std::vector<Tensor> SequentialModel::InitialBuffers() const {
  std::vector<Tensor> all;
  for (const auto& layer : layers_) {
    for (Tensor& t : layer->InitialBuffers()) all.push_back(std::move(t));
  }
  return all;
}

std::vector<std::string> SequentialModel::BufferNames() const {
  std::vector<std::string> all;
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (const std::string& name : layers_[i]->BufferNames())
      all.push_back(absl::StrCat(i, ".", name));
  }
  return all;
}

}  // namespace

size_t Model::NumParamValues() const {
  size_t n = 0;
  for (const Param* p : params_) n += p->value.size();
  return n;
}

StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name, std::vector<int> input_chw,
                                            int classes) {
  if (input_chw.size() != 3) {
    return absl::InvalidArgumentError("--model " + name +
                                      ": takes [C, H, W] images, the data's samples are not "
                                      "images (train them with --model-file)");
  }
  const int C = input_chw[0], H = input_chw[1], W = input_chw[2];
  std::vector<std::unique_ptr<Layer>> l;
  if (name == "mlp") {
    if (H % 2 || W % 2) return absl::InvalidArgumentError("mlp: input H and W must be even");
    const int features = C * (H / 2) * (W / 2);
    l.push_back(MakeAvgPool2());
    l.push_back(MakeFlatten());
    l.push_back(MakeLinear(features, 128));
    l.push_back(MakeRelu());
    l.push_back(MakeDropout(0.1f));
    l.push_back(MakeLinear(128, classes));
  } else if (name == "cnn") {
    const int h1 = H - 4, w1 = W - 4;
    if (h1 < 2 || h1 % 2 || w1 % 2 || (h1 / 2 - 4) < 2 || (h1 / 2 - 4) % 2 || (w1 / 2 - 4) % 2) {
      return absl::InvalidArgumentError(
          "cnn: input must be at least 20x20 with H-4, W-4 divisible by 4");
    }
    const int h2 = (h1 / 2 - 4) / 2, w2 = (w1 / 2 - 4) / 2;
    l.push_back(MakeConv2d(C, 8, 5));
    l.push_back(MakeBatchNorm2d(8));
    l.push_back(MakeRelu());
    l.push_back(MakeMaxPool2());
    l.push_back(MakeConv2d(8, 16, 5));
    l.push_back(MakeBatchNorm2d(16));
    l.push_back(MakeRelu());
    l.push_back(MakeMaxPool2());
    l.push_back(MakeFlatten());
    l.push_back(MakeDropout(0.25f));
    l.push_back(MakeLinear(16 * h2 * w2, 64));
    l.push_back(MakeRelu());
    l.push_back(MakeLinear(64, classes));
  } else {
    return absl::InvalidArgumentError("unknown model \"" + name + "\" (want mlp or cnn)");
  }
  return std::unique_ptr<Model>(std::make_unique<SequentialModel>(std::move(l)));
}

StatusOr<std::vector<int>> ModelImageShape(const TrainingArgs& args) {
  if (args.model != "file") return std::vector<int>{1, 28, 28};
  return graph::ImageInputShape(args.modelFile);
}

StatusOr<std::unique_ptr<Model>> LoadModel(const TrainingArgs& args, std::vector<int> input_chw,
                                           int classes, int batch) {
  if (args.model != "file") return BuildModel(args.model, std::move(input_chw), classes);
  return graph::LoadGraphModel(args.modelFile, std::move(input_chw), classes, batch);
}

}  // namespace easyscale

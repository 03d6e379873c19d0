#include "easyscale/worker/model.h"

#include "graph/graph_model.h"

namespace easyscale {

size_t Model::NumParamValues() const {
  size_t n = 0;
  for (const Param* p : params_) n += p->value.size();
  return n;
}

StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name,
                                            const std::vector<int>& input_chw, int classes,
                                            int batch) {
  return graph::BuiltinGraphModel(name, input_chw, classes, batch);
}

StatusOr<std::vector<int>> ModelImageShape(const TrainingArgs& args) {
  if (args.model != "file") return std::vector<int>{1, 28, 28};
  return graph::ImageInputShape(args.modelFile);
}

StatusOr<std::unique_ptr<Model>> LoadModel(const TrainingArgs& args, std::vector<int> input_chw,
                                           int classes, int batch) {
  if (args.model != "file") return BuildModel(args.model, input_chw, classes, batch);
  return graph::LoadGraphModel(args.modelFile, std::move(input_chw), classes, batch);
}

}  // namespace easyscale

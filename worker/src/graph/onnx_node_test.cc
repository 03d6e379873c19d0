// ONNX's own operator tests (Debian's libonnx-testdata, data/node/<test>/:
// model.onnx with test_data_set_0/input_*.pb and output_*.pb): every test
// whose operators the runtime has is loaded, run through a Program and
// compared with ONNX's expected outputs within the tolerance of ONNX's backend
// test runner (|actual - expected| <= atol + rtol * |expected|).
//
// How a test is fed, and why:
// - Integer and bool inputs, and float scalars, become initializers: they are
//   the configuration an exported model has as constants (Reshape's shape,
//   Slice's starts, Clip's bounds, Dropout's ratio and training_mode), which
//   the ops read at load time. Other float inputs stay data inputs, shaped
//   from their input_*.pb.
// - ONNX's tests say training mode through BatchNormalization's training_mode
//   attribute and Dropout's training_mode input; our ops take it from the
//   RunContext, so tests named "*training*" run with training = true, all
//   others with training = false.
// - Tests with data types other than float32, int64 and bool, or of a default
//   opset the loader refuses (outside 11 to 17), count as excluded, as do the
//   ones in kExclusions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "graph/onnx_tensor.h"
#include "graph/program.h"
#include "onnx/onnx_pb.h"

namespace easyscale::graph {
namespace {

constexpr char kNodeTests[] = "/usr/share/libonnx-testdata/data/node";
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;
constexpr size_t kMaxTestFileBytes = 64 << 20;

struct Exclusion {
  const char* test;
  const char* reason;
};

// Tests of supported ops that we deliberately do not pass.
constexpr Exclusion kExclusions[] = {
    {"test_batchnorm_epsilon_training_mode",
     "ONNX updates the running variance with the biased batch variance, PyTorch (which we "
     "follow) with the unbiased one"},
    {"test_batchnorm_example_training_mode",
     "ONNX updates the running variance with the biased batch variance, PyTorch (which we "
     "follow) with the unbiased one"},
    {"test_averagepool_3d_default", "3-D pooling: the runtime takes 1-D and 2-D (images)"},
    {"test_maxpool_3d_default", "3-D pooling: the runtime takes 1-D and 2-D (images)"},
    {"test_maxpool_with_argmax_2d_precomputed_pads",
     "MaxPool's Indices output (PyTorch's training export never asks for it)"},
    {"test_maxpool_with_argmax_2d_precomputed_strides",
     "MaxPool's Indices output (PyTorch's training export never asks for it)"},
    {"test_pow_types_int64_float32", "Pow takes float32 bases only (what PyTorch exports)"},
    {"test_pow_types_int64_int64", "Pow takes float32 bases only (what PyTorch exports)"},
    {"test_training_dropout", "the mask comes from numpy's generator, ours from Philox"},
    {"test_training_dropout_default", "the mask comes from numpy's generator, ours from Philox"},
    {"test_training_dropout_default_mask",
     "the mask comes from numpy's generator, ours from Philox"},
    {"test_training_dropout_mask", "the mask comes from numpy's generator, ours from Philox"},
};

// Operators the loader evaluates itself rather than through the registry.
constexpr const char* kLoaderOps[] = {"Constant", "Shape"};

bool SupportedDataType(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::INT64 ||
         t == onnx::TensorProto::BOOL;
}

// Test-only: a TensorProto as a program Value, through the loader's reader.
StatusOr<Value> ReadValue(const std::string& path, onnx::TensorProto* proto) {
  ES_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path, kMaxTestFileBytes));
  if (!proto->ParseFromString(bytes)) {
    return absl::InvalidArgumentError(path + ": not a TensorProto");
  }
  StatusOr<ConstantTensor> c = FromTensorProto(*proto);
  if (!c.ok()) return absl::InvalidArgumentError(path + ": " + std::string(c.status().message()));
  return Value{c->dtype, std::move(c->shape), std::move(c->floats), std::move(c->ints)};
}

// Why the test does not run, or "" when it does: an operator we lack
// (unsupported) or a data type or opset the loader refuses (excluded).
std::string UnsupportedOp(const onnx::ModelProto& model) {
  const std::vector<std::string>& ops = SupportedOps();
  for (const onnx::NodeProto& n : model.graph().node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") return n.domain() + "." + n.op_type();
    if (std::find(ops.begin(), ops.end(), n.op_type()) != ops.end()) continue;
    if (std::find(std::begin(kLoaderOps), std::end(kLoaderOps), n.op_type()) !=
        std::end(kLoaderOps)) {
      continue;
    }
    return n.op_type();
  }
  return "";
}

std::string ExclusionReason(const std::string& test, const onnx::ModelProto& model) {
  for (const Exclusion& e : kExclusions) {
    if (test == e.test) return e.reason;
  }
  for (const auto& o : model.opset_import()) {
    if ((o.domain().empty() || o.domain() == "ai.onnx") && (o.version() < 11 || o.version() > 17))
      return "opset " + std::to_string(o.version()) + " (the loader takes 11 to 17)";
  }
  const onnx::GraphProto& g = model.graph();
  for (const auto* list : {&g.input(), &g.output()}) {
    for (const onnx::ValueInfoProto& v : *list) {
      const int32_t t = v.type().tensor_type().elem_type();
      if (!v.type().has_tensor_type() || !SupportedDataType(t)) {
        return "data type " + DataTypeName(t) + " of " + v.name();
      }
    }
  }
  for (const onnx::TensorProto& t : g.initializer()) {
    if (!SupportedDataType(t.data_type())) {
      return "data type " + DataTypeName(t.data_type()) + " of " + t.name();
    }
  }
  return "";
}

bool Close(float actual, float expected) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  return std::abs(static_cast<double>(actual) - expected) <=
         kAtol + kRtol * std::abs(static_cast<double>(expected));
}

// "" when `actual` matches `expected`, else what differs.
std::string Compare(const Value& actual, const Value& expected) {
  if (actual.dtype != expected.dtype) {
    return std::string("dtype ") + ToString(actual.dtype) + ", expected " +
           ToString(expected.dtype);
  }
  if (actual.shape != expected.shape) return "shape differs";
  for (size_t e = 0; e < expected.floats.size(); ++e) {
    if (!Close(actual.floats[e], expected.floats[e])) {
      return "element " + std::to_string(e) + " is " + std::to_string(actual.floats[e]) +
             ", expected " + std::to_string(expected.floats[e]);
    }
  }
  for (size_t e = 0; e < expected.ints.size(); ++e) {
    if (actual.ints[e] != expected.ints[e]) {
      return "element " + std::to_string(e) + " is " + std::to_string(actual.ints[e]) +
             ", expected " + std::to_string(expected.ints[e]);
    }
  }
  return "";
}

// Loads and runs one test; "" when every output matches, else why not.
std::string RunNodeTest(const std::filesystem::path& dir, const std::string& test,
                        onnx::ModelProto model, const std::filesystem::path& scratch) {
  const std::filesystem::path data = dir / "test_data_set_0";
  onnx::GraphProto* g = model.mutable_graph();
  // The inputs, in graph order; configuration inputs move to initializers.
  std::map<std::string, Shape> shapes;
  std::vector<Value> feeds;
  std::vector<onnx::ValueInfoProto> data_inputs;
  for (int i = 0; i < g->input_size(); ++i) {
    onnx::TensorProto proto;
    StatusOr<Value> v = ReadValue((data / ("input_" + std::to_string(i) + ".pb")).string(), &proto);
    if (!v.ok()) return std::string(v.status().message());
    const onnx::ValueInfoProto& in = g->input(i);
    if (v->dtype == DType::kFloat32 && !v->shape.empty()) {
      shapes[in.name()] = v->shape;
      feeds.push_back(std::move(*v));
      data_inputs.push_back(in);
      continue;
    }
    proto.set_name(in.name());
    *g->add_initializer() = proto;
  }
  g->clear_input();
  for (const onnx::ValueInfoProto& in : data_inputs) *g->add_input() = in;
  const std::string path = (scratch / (test + ".onnx")).string();
  if (Status s = WriteFileAtomic(path, model.SerializeAsString()); !s.ok()) {
    return std::string(s.message());
  }

  StatusOr<Graph> graph = LoadOnnxModel(path, shapes);
  if (!graph.ok()) return "loading: " + std::string(graph.status().message());
  StatusOr<std::unique_ptr<Program>> program = Program::Create(std::move(*graph));
  if (!program.ok()) return "compiling: " + std::string(program.status().message());
  Program& p = **program;
  for (size_t i = 0; i < feeds.size(); ++i) p.Input(i) = feeds[i];
  RunContext ctx;
  ctx.training = test.find("training") != std::string::npos;
  uint64_t dropout_counter = 0;
  ctx.dropout_counter = &dropout_counter;
  p.Forward(ctx);
  for (int o = 0; o < g->output_size(); ++o) {
    onnx::TensorProto proto;
    StatusOr<Value> expected =
        ReadValue((data / ("output_" + std::to_string(o) + ".pb")).string(), &proto);
    if (!expected.ok()) return std::string(expected.status().message());
    const std::string diff = Compare(p.Output(o), *expected);
    if (!diff.empty()) return "output " + g->output(o).name() + ": " + diff;
  }
  return "";
}

TEST(OnnxNodeTest, SupportedOperatorsMatchOnnx) {
  if (!std::filesystem::is_directory(kNodeTests)) {
    GTEST_SKIP() << kNodeTests << " is absent (Debian's libonnx-testdata)";
  }
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(kNodeTests)) {
    if (entry.is_directory()) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path() / ("es-onnx-node-" + std::to_string(::getpid()));
  ASSERT_TRUE(MakeDirs(scratch.string()).ok());

  size_t passed = 0, excluded = 0, unsupported = 0;
  std::map<std::string, std::vector<std::string>> excluded_by_reason;
  for (const std::filesystem::path& dir : dirs) {
    const std::string test = dir.filename().string();
    const std::string model_path = (dir / "model.onnx").string();
    StatusOr<std::string> bytes = ReadFile(model_path, kMaxTestFileBytes);
    onnx::ModelProto model;
    if (!bytes.ok() || !model.ParseFromString(*bytes)) {
      ADD_FAILURE() << test << ": cannot read " << model_path;
      continue;
    }
    if (!UnsupportedOp(model).empty()) {
      ++unsupported;
      continue;
    }
    if (const std::string why = ExclusionReason(test, model); !why.empty()) {
      ++excluded;
      excluded_by_reason[why].push_back(test);
      continue;
    }
    const std::string failure = RunNodeTest(dir, test, std::move(model), scratch);
    if (failure.empty()) {
      ++passed;
    } else {
      ADD_FAILURE() << test << ": " << failure;
    }
  }
  std::filesystem::remove_all(scratch);
  for (const auto& [why, tests] : excluded_by_reason) {
    std::cout << "excluded (" << why << "): ";
    for (const std::string& t : tests) std::cout << t << (&t == &tests.back() ? "\n" : ", ");
  }
  std::cout << "ONNX node tests: " << passed << " passed, " << excluded << " excluded, "
            << unsupported << " unsupported-op\n";
}

}  // namespace
}  // namespace easyscale::graph

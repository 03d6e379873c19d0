// The ONNX loader: models built here with the ONNX protobuf classes, written
// to a temporary folder and loaded. Tests that need ops another branch adds
// skip until the registry has them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "easyscale/common/file_io.h"
#include "easyscale/worker/graph.h"
#include "graph/onnx_tensor.h"
#include "graph/program.h"
#include "onnx/onnx_pb.h"

namespace easyscale::graph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

bool Supported(const std::string& op) {
  const std::vector<std::string>& ops = SupportedOps();
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

#define REQUIRE_OPS(...)                                              \
  for (const std::string& op : std::vector<std::string>{__VA_ARGS__}) \
    if (!Supported(op)) GTEST_SKIP() << "needs op " << op;

// A value's type: elem_type and dims, -1 for a symbolic dimension ("N").
void SetType(onnx::ValueInfoProto* v, const std::string& name, int32_t elem_type,
             const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) {
      shape->add_dim()->set_dim_param("N");
    } else {
      shape->add_dim()->set_dim_value(d);
    }
  }
}

void AddInput(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
              int32_t elem_type = onnx::TensorProto::FLOAT) {
  SetType(g->add_input(), name, elem_type, dims);
}

void AddOutput(onnx::GraphProto* g, const std::string& name,
               int32_t elem_type = onnx::TensorProto::FLOAT) {
  auto* v = g->add_output();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  t->mutable_shape();  // the checker wants one, even of unknown rank
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

void AddIntsAttribute(onnx::NodeProto* n, const std::string& name,
                      const std::vector<int64_t>& values) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void AddIntAttribute(onnx::NodeProto* n, const std::string& name, int64_t value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

onnx::TensorProto FloatTensor(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

onnx::TensorProto IntTensor(const std::string& name, const std::vector<int64_t>& dims,
                            const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

onnx::ModelProto NewModel(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("test");
  return m;
}

// X: float [N, 3, 4], data; W: float [4, 5] initializer, also listed as an
// input as older exporters do; Shape(X) and a Constant as outputs.
onnx::ModelProto BaseModel() {
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "X", {-1, 3, 4});
  AddInput(g, "W", {4, 5});
  std::vector<float> w(20);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i);
  *g->add_initializer() = FloatTensor("W", {4, 5}, w);
  AddNode(g, "Shape", {"X"}, {"s"});
  auto* c = AddNode(g, "Constant", {}, {"c"}, "const");
  auto* a = c->add_attribute();
  a->set_name("value_floats");
  a->set_type(onnx::AttributeProto::FLOATS);
  a->add_floats(1.5f);
  a->add_floats(-2.0f);
  AddOutput(g, "s", onnx::TensorProto::INT64);
  AddOutput(g, "c");
  return m;
}

class OnnxLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("es-onnx-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(MakeDirs(dir_.string()).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteBytes(const std::string& bytes) {
    const std::string path = (dir_ / "model.onnx").string();
    EXPECT_TRUE(WriteFileAtomic(path, bytes).ok());
    return path;
  }
  std::string Write(const onnx::ModelProto& m) { return WriteBytes(m.SerializeAsString()); }

  // Loading `m` fails with `code`; the message is one line starting with the path.
  std::string LoadError(const onnx::ModelProto& m, const std::map<std::string, Shape>& shapes,
                        absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    return ErrorOf(Write(m), shapes, code);
  }
  std::string ErrorOf(const std::string& path, const std::map<std::string, Shape>& shapes,
                      absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    StatusOr<Graph> g = LoadOnnxModel(path, shapes);
    EXPECT_FALSE(g.ok());
    if (g.ok()) return "";
    EXPECT_EQ(g.status().code(), code) << g.status();
    const std::string message(g.status().message());
    EXPECT_THAT(message, StartsWith(path + ": "));
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }

  std::filesystem::path dir_;
};

TEST_F(OnnxLoaderTest, LoadsAValidModelAndFoldsConstantAndShape) {
  const std::string path = Write(BaseModel());
  StatusOr<Graph> g = LoadOnnxModel(path, {{"X", {2, 3, 4}}});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->opset, 17);
  EXPECT_THAT(g->inputs, ElementsAre("X"));
  EXPECT_THAT(g->outputs, ElementsAre("s", "c"));
  EXPECT_TRUE(g->nodes.empty());
  EXPECT_EQ(g->values.at("X").shape, (Shape{2, 3, 4}));
  EXPECT_EQ(g->values.at("X").dtype, DType::kFloat32);

  const ConstantTensor& s = g->initializers.at("s");
  EXPECT_EQ(s.dtype, DType::kInt64);
  EXPECT_EQ(s.shape, (Shape{3}));
  EXPECT_THAT(s.ints, ElementsAre(2, 3, 4));
  const ConstantTensor& c = g->initializers.at("c");
  EXPECT_EQ(c.dtype, DType::kFloat32);
  EXPECT_EQ(c.shape, (Shape{2}));
  EXPECT_THAT(c.floats, ElementsAre(1.5f, -2.0f));
  EXPECT_EQ(g->values.at("c").shape, (Shape{2}));
  EXPECT_EQ(g->constants, (std::set<std::string>{"c", "s"}));
  // Nothing reads W any more.
  EXPECT_EQ(g->initializers.count("W"), 0u);
  EXPECT_EQ(g->values.count("W"), 0u);

  StatusOr<std::vector<DataInput>> inputs = OnnxDataInputs(path);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->size(), 1u);
  EXPECT_EQ((*inputs)[0].name, "X");
  EXPECT_EQ((*inputs)[0].rank, 3);
}

TEST_F(OnnxLoaderTest, ShapeHonoursStartAndEnd) {
  onnx::ModelProto m = NewModel(15);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "X", {2, 3, 4, 5});
  AddIntAttribute(AddNode(g, "Shape", {"X"}, {"mid"}), "start", 1);
  onnx::NodeProto* n = AddNode(g, "Shape", {"X"}, {"tail"});
  AddIntAttribute(n, "start", -2);
  AddIntAttribute(n, "end", 100);
  n = AddNode(g, "Shape", {"X"}, {"none"});
  AddIntAttribute(n, "start", 3);
  AddIntAttribute(n, "end", 1);
  for (const char* out : {"mid", "tail", "none"}) AddOutput(g, out, onnx::TensorProto::INT64);
  StatusOr<Graph> loaded = LoadOnnxModel(Write(m), {{"X", {2, 3, 4, 5}}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(loaded->initializers.at("mid").ints, ElementsAre(3, 4, 5));
  EXPECT_THAT(loaded->initializers.at("tail").ints, ElementsAre(4, 5));
  EXPECT_TRUE(loaded->initializers.at("none").ints.empty());
  EXPECT_EQ(loaded->initializers.at("none").shape, (Shape{0}));
}

TEST_F(OnnxLoaderTest, KeepsANodeAndInfersItsShape) {
  REQUIRE_OPS("MatMul");
  onnx::ModelProto m = BaseModel();
  AddNode(m.mutable_graph(), "MatMul", {"X", "W"}, {"Y"});
  AddOutput(m.mutable_graph(), "Y");
  StatusOr<Graph> g = LoadOnnxModel(Write(m), {{"X", {2, 3, 4}}});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0].name, "MatMul_2");  // its index among the file's nodes
  EXPECT_EQ(g->values.at("Y").shape, (Shape{2, 3, 5}));
  // The file's float initializer stays one: it may be a parameter.
  EXPECT_EQ(g->initializers.count("W"), 1u);
  EXPECT_EQ(g->constants.count("W"), 0u);
}

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch exports
// x.view(x.size(0), -1): everything before the Reshape folds.
TEST_F(OnnxLoaderTest, FoldsAShapeComputationChain) {
  REQUIRE_OPS("Gather", "Unsqueeze", "Concat", "Reshape");
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "X", {-1, 3, 4});
  *g->add_initializer() = IntTensor("zero", {}, {0});
  AddNode(g, "Shape", {"X"}, {"s"});
  AddNode(g, "Gather", {"s", "zero"}, {"n"});
  onnx::NodeProto* axes = AddNode(g, "Constant", {}, {"axes"});
  auto* a = axes->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = IntTensor("", {1}, {0});
  AddNode(g, "Unsqueeze", {"n", "axes"}, {"n1"});
  onnx::NodeProto* rest = AddNode(g, "Constant", {}, {"rest"});
  AddIntsAttribute(rest, "value_ints", {-1});
  AddIntAttribute(AddNode(g, "Concat", {"n1", "rest"}, {"shape"}), "axis", 0);
  AddNode(g, "Reshape", {"X", "shape"}, {"Y"}, "flatten");
  AddOutput(g, "Y");
  StatusOr<Graph> loaded = LoadOnnxModel(Write(m), {{"X", {5, 3, 4}}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->nodes.size(), 1u);
  EXPECT_EQ(loaded->nodes[0].name, "flatten");
  EXPECT_THAT(loaded->initializers.at("shape").ints, ElementsAre(5, -1));
  EXPECT_EQ(loaded->constants, (std::set<std::string>{"shape"}));
  EXPECT_EQ(loaded->values.at("Y").shape, (Shape{5, 12}));
  for (const char* gone : {"s", "zero", "n", "axes", "n1", "rest"}) {
    EXPECT_EQ(loaded->initializers.count(gone), 0u) << gone;
    EXPECT_EQ(loaded->values.count(gone), 0u) << gone;
  }
}

// A small CNN as PyTorch exports it in training mode (Conv, BatchNormalization
// with its running statistics, Relu, x.view(x.size(0), -1), Linear): the graph
// the loader makes compiles into a Program with the expected parameters and
// state, and trains a step.
TEST_F(OnnxLoaderTest, AnExportedCnnBecomesAProgram) {
  REQUIRE_OPS("Conv", "BatchNormalization", "Relu", "Gather", "Unsqueeze", "Concat", "Reshape",
              "Gemm");
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "X", {-1, 1, 4, 4});
  auto ramp = [](size_t n, float step) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = step * static_cast<float>(static_cast<int>(i % 7) - 3);
    return v;
  };
  *g->add_initializer() = FloatTensor("W", {2, 1, 3, 3}, ramp(18, 0.1f));
  *g->add_initializer() = FloatTensor("B", {2}, {0.1f, -0.1f});
  *g->add_initializer() = FloatTensor("scale", {2}, {1.0f, 0.5f});
  *g->add_initializer() = FloatTensor("bias", {2}, {0.0f, 0.2f});
  *g->add_initializer() = FloatTensor("mean", {2}, {0.0f, 0.0f});
  *g->add_initializer() = FloatTensor("var", {2}, {1.0f, 1.0f});
  *g->add_initializer() = FloatTensor("W2", {3, 32}, ramp(96, 0.05f));
  *g->add_initializer() = FloatTensor("B2", {3}, {0.0f, 0.1f, 0.2f});
  *g->add_initializer() = IntTensor("zero", {}, {0});
  *g->add_initializer() = IntTensor("axes", {1}, {0});
  *g->add_initializer() = IntTensor("rest", {1}, {-1});
  AddIntsAttribute(AddNode(g, "Conv", {"X", "W", "B"}, {"c"}), "pads", {1, 1, 1, 1});
  AddIntAttribute(AddNode(g, "BatchNormalization", {"c", "scale", "bias", "mean", "var"},
                          {"bn", "mean_out", "var_out"}),
                  "training_mode", 1);
  AddNode(g, "Relu", {"bn"}, {"r"});
  AddNode(g, "Shape", {"r"}, {"s"});
  AddNode(g, "Gather", {"s", "zero"}, {"n"});
  AddNode(g, "Unsqueeze", {"n", "axes"}, {"n1"});
  AddIntAttribute(AddNode(g, "Concat", {"n1", "rest"}, {"shape"}), "axis", 0);
  AddNode(g, "Reshape", {"r", "shape"}, {"flat"});
  AddIntAttribute(AddNode(g, "Gemm", {"flat", "W2", "B2"}, {"logits"}), "transB", 1);
  AddOutput(g, "logits");

  StatusOr<Graph> loaded = LoadOnnxModel(Write(m), {{"X", {2, 1, 4, 4}}});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<std::string> ops;
  for (const Node& n : loaded->nodes) ops.push_back(n.op);
  EXPECT_THAT(ops, ElementsAre("Conv", "BatchNormalization", "Relu", "Reshape", "Gemm"));
  EXPECT_EQ(loaded->values.at("flat").shape, (Shape{2, 32}));
  EXPECT_EQ(loaded->values.at("logits").shape, (Shape{2, 3}));

  StatusOr<std::unique_ptr<Program>> p = Program::Create(std::move(*loaded));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT((*p)->parameters(), ElementsAre("W", "B", "scale", "bias", "W2", "B2"));
  EXPECT_THAT((*p)->state(), ElementsAre("mean", "var"));
  Value x;
  x.Reset(DType::kFloat32, {2, 1, 4, 4});
  for (size_t i = 0; i < x.floats.size(); ++i) x.floats[i] = 0.1f * static_cast<float>(i % 5);
  (*p)->Input(0) = x;
  RunContext ctx;
  uint64_t dropout_counter = 0;
  ctx.dropout_counter = &dropout_counter;
  (*p)->Forward(ctx);
  EXPECT_EQ((*p)->Output(0).shape, (Shape{2, 3}));
  Value dlogits;
  dlogits.Reset(DType::kFloat32, {2, 3});
  dlogits.floats.assign(6, 1.0f);
  (*p)->Backward(ctx, 0, dlogits);
  EXPECT_EQ((*p)->Gradient("W").shape, (Shape{2, 1, 3, 3}));
  EXPECT_EQ((*p)->Gradient("B2").shape, (Shape{3}));
}

TEST_F(OnnxLoaderTest, RefusesATruncatedFile) {
  onnx::ModelProto m = BaseModel();
  std::string bytes = m.SerializeAsString();
  bytes.resize(bytes.size() / 2);
  EXPECT_THAT(ErrorOf(WriteBytes(bytes), {{"X", {2, 3, 4}}}), HasSubstr("truncated"));
}

TEST_F(OnnxLoaderTest, RefusesBytesThatAreNoOnnxModel) {
  EXPECT_THAT(ErrorOf(WriteBytes("this is not an ONNX model\n"), {}),
              HasSubstr("not an ONNX model"));
  EXPECT_THAT(ErrorOf(WriteBytes(""), {}), HasSubstr("not an ONNX model"));
  StatusOr<std::vector<DataInput>> inputs = OnnxDataInputs(WriteBytes("\x01\x02garbage"));
  EXPECT_FALSE(inputs.ok());
}

TEST_F(OnnxLoaderTest, MissingFileIsAnErrorNamingIt) {
  const std::string path = (dir_ / "absent.onnx").string();
  StatusOr<Graph> g = LoadOnnxModel(path, {});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(path));
}

TEST_F(OnnxLoaderTest, UnsupportedOpNamesNodeOpAndOpset) {
  if (Supported("Det")) GTEST_SKIP() << "Det is supported";
  onnx::ModelProto m = BaseModel();
  AddNode(m.mutable_graph(), "Det", {"W"}, {"d"}, "det0");
  AddOutput(m.mutable_graph(), "d");
  const std::string message = LoadError(m, {{"X", {2, 3, 4}}}, absl::StatusCode::kUnimplemented);
  EXPECT_THAT(message, HasSubstr("det0"));
  EXPECT_THAT(message, HasSubstr("Det"));
  EXPECT_THAT(message, HasSubstr("opset 17"));
}

TEST_F(OnnxLoaderTest, MissingInitializerIsNamed) {
  onnx::ModelProto m = BaseModel();
  AddNode(m.mutable_graph(), "MatMul", {"X", "B"}, {"Y"}, "mm");
  AddOutput(m.mutable_graph(), "Y");
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}}),
              HasSubstr("node mm reads B, which no initializer, input or earlier node provides"));
}

TEST_F(OnnxLoaderTest, NodesOutOfTopologicalOrderAreRefused) {
  onnx::ModelProto m = NewModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "X", {2});
  AddNode(g, "Relu", {"a"}, {"b"}, "second");
  AddNode(g, "Relu", {"X"}, {"a"}, "first");
  AddOutput(g, "b");
  EXPECT_THAT(LoadError(m, {{"X", {2}}}),
              HasSubstr("node second reads a before node first computes it"));
}

TEST_F(OnnxLoaderTest, InputShapesMustFitTheDeclaredType) {
  onnx::ModelProto m = BaseModel();
  EXPECT_THAT(LoadError(m, {{"X", {2, 3}}}), HasSubstr("input X has rank 3 in the model"));
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 5}}}), HasSubstr("input X: dimension 2 is 4"));
  EXPECT_THAT(LoadError(m, {{"X", {-1, 3, 4}}}), HasSubstr("input X: shape [-1, 3, 4]"));
  EXPECT_THAT(LoadError(m, {}), HasSubstr("input X has no shape in input_shapes"));
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}, {"W", {4, 5}}}),
              HasSubstr("input_shapes names W, which is not a data input"));
}

TEST_F(OnnxLoaderTest, RefusesUnsupportedDataTypesNamingThem) {
  onnx::ModelProto m = BaseModel();
  onnx::TensorProto* d = m.mutable_graph()->add_initializer();
  d->set_name("D");
  d->set_data_type(onnx::TensorProto::DOUBLE);
  d->add_dims(1);
  d->add_double_data(1.0);
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}}),
              HasSubstr("initializer D: data type DOUBLE is not supported"));

  m = BaseModel();
  AddInput(m.mutable_graph(), "H", {2}, onnx::TensorProto::FLOAT16);
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}, {"H", {2}}}),
              HasSubstr("input H: data type FLOAT16 is not supported"));
}

TEST_F(OnnxLoaderTest, RefusesOpsetsOutsideThoseSupported) {
  onnx::ModelProto m = BaseModel();
  m.mutable_opset_import(0)->set_version(18);
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}}),
              HasSubstr("default-domain opset 18 is not supported (opsets 11 to 17 are)"));
}

TEST_F(OnnxLoaderTest, RefusesOtherDomains) {
  onnx::ModelProto m = BaseModel();
  auto* o = m.add_opset_import();
  o->set_domain("com.example");
  o->set_version(1);
  AddNode(m.mutable_graph(), "Fancy", {"X"}, {"f"}, "fancy")->set_domain("com.example");
  AddOutput(m.mutable_graph(), "f");
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}}),
              HasSubstr("node fancy: operator Fancy of domain com.example is not supported"));
}

// The runtime's registry also makes nodes only graph/fusion.h writes
// ("MatMul+Add", "Transpose+MatMul", ...); a file that names one is no ONNX
// model, and the checker says so before any op is made.
TEST_F(OnnxLoaderTest, RefusesTheRuntimesOwnFusedOps) {
  for (const std::string op : {"MatMul+Add", "Transpose+MatMul", "Transpose+MatMul+Add"}) {
    onnx::ModelProto m = BaseModel();
    AddNode(m.mutable_graph(), op, {"X", "X", "X"}, {"f"}, "mine");
    AddOutput(m.mutable_graph(), "f");
    EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}}),
                HasSubstr("the ONNX checker refuses it: No Op registered for " + op));
  }
}

TEST_F(OnnxLoaderTest, RefusesGraphAttributes) {
  onnx::ModelProto m = BaseModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "cond", {}, onnx::TensorProto::BOOL);
  onnx::NodeProto* n = AddNode(g, "If", {"cond"}, {"r"}, "branch");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* body = a->mutable_g();
    body->set_name(name);
    auto* c = AddNode(body, "Constant", {}, {std::string(name) + "_out"});
    auto* v = c->add_attribute();
    v->set_name("value_float");
    v->set_type(onnx::AttributeProto::FLOAT);
    v->set_f(1.0f);
    AddOutput(body, std::string(name) + "_out");
  }
  AddOutput(g, "r");
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}, {"cond", {}}}),
              HasSubstr("node branch (If): attribute then_branch: graph-valued"));
}

TEST_F(OnnxLoaderTest, CheckerErrorsAreOneLine) {
  onnx::ModelProto m = BaseModel();
  AddNode(m.mutable_graph(), "Concat", {"X", "X"}, {"xx"}, "cat");  // no axis
  AddOutput(m.mutable_graph(), "xx");
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}}), HasSubstr("the ONNX checker refuses it: "));
}

TEST_F(OnnxLoaderTest, RefusesStringConstants) {
  onnx::ModelProto m = BaseModel();
  auto* a = AddNode(m.mutable_graph(), "Constant", {}, {"text"}, "words")->add_attribute();
  a->set_name("value_string");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("hello");
  AddOutput(m.mutable_graph(), "text", onnx::TensorProto::STRING);
  EXPECT_THAT(LoadError(m, {{"X", {2, 3, 4}}}),
              HasSubstr("node words (Constant): attribute value_string is not supported"));
}

TEST(OnnxTensorTest, ReadsRawAndTypedData) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(2);
  const float f[2] = {1.25f, -3.0f};
  t.set_raw_data(std::string(reinterpret_cast<const char*>(f), sizeof f));
  StatusOr<ConstantTensor> c = FromTensorProto(t);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kFloat32);
  EXPECT_THAT(c->floats, ElementsAre(1.25f, -3.0f));

  c = FromTensorProto(IntTensor("i", {2, 1}, {7, -8}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shape, (Shape{2, 1}));
  EXPECT_THAT(c->ints, ElementsAre(7, -8));

  onnx::TensorProto b;
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(3);
  b.set_raw_data(std::string("\x01\x00\x01", 3));
  c = FromTensorProto(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype, DType::kBool);
  EXPECT_THAT(c->ints, ElementsAre(1, 0, 1));
  b.clear_raw_data();
  for (int v : {0, 1, 0}) b.add_int32_data(v);
  c = FromTensorProto(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->ints, ElementsAre(0, 1, 0));
}

TEST(OnnxTensorTest, RefusesMismatchedSizesAndExternalData) {
  onnx::TensorProto t = FloatTensor("x", {3}, {1, 2});
  EXPECT_THAT(std::string(FromTensorProto(t).status().message()),
              HasSubstr("float_data has 2 elements, the shape needs 3"));
  t.clear_float_data();
  t.set_raw_data("12345");
  EXPECT_THAT(std::string(FromTensorProto(t).status().message()),
              HasSubstr("raw_data has 5 bytes"));
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  EXPECT_THAT(std::string(FromTensorProto(t).status().message()), HasSubstr("external data"));
}

}  // namespace
}  // namespace easyscale::graph

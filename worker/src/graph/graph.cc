// Graph values: dtype names, element counts, resetting a value.
#include "easyscale/worker/graph.h"

#include "graph/op.h"

namespace easyscale::graph {

const char* ToString(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
  }
  return "unknown";
}

int64_t NumElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

void Value::Reset(DType t, Shape s) {
  dtype = t;
  shape = std::move(s);
  const size_t n = size();
  floats.clear();
  ints.clear();
  if (dtype == DType::kFloat32) {
    floats.assign(n, 0.0f);
  } else {
    ints.assign(n, 0);
  }
}

}  // namespace easyscale::graph

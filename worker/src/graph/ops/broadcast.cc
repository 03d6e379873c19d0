// Numpy broadcasting of two shapes (no reductions here; see broadcast.h).
#include "graph/ops/broadcast.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/row_readers.h"

namespace easyscale::graph {

StatusOr<Broadcast> MakeBroadcast(const Node& node, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Broadcast bc;
  bc.out.assign(rank, 1);
  // Dimension d of the output is dimension d - (rank - size) of a shorter operand.
  auto dim = [&](const Shape& s, size_t d) -> int64_t {
    return d + s.size() < rank ? 1 : s[d + s.size() - rank];
  };
  for (size_t d = 0; d < rank; ++d) {
    const int64_t da = dim(a, d), db = dim(b, d);
    if (da != db && da != 1 && db != 1) {
      return NodeError(node, absl::StrCat("input shapes [", absl::StrJoin(a, ","), "] and [",
                                          absl::StrJoin(b, ","), "] do not broadcast"));
    }
    bc.out[d] = da == 1 ? db : da;
  }
  // Row-major steps of each operand, 0 along the dimensions it is broadcast in.
  auto steps = [&](const Shape& s) {
    std::vector<int64_t> st(rank, 0);
    int64_t step = 1;
    for (size_t d = rank; d-- > 0;) {
      const int64_t n = dim(s, d);
      st[d] = n == 1 ? 0 : step;
      step *= n;
    }
    return st;
  };
  bc.a_steps = steps(a);
  bc.b_steps = steps(b);
  return bc;
}

namespace {
RowReaders OperandRows(const Broadcast& bc, int operand) {
  return RowReadersOf(static_cast<int>(bc.out.size()), bc.out.data(),
                      (operand == 0 ? bc.a_steps : bc.b_steps).data());
}
}  // namespace

bool NotBroadcast(const Broadcast& bc, int operand) { return OperandRows(bc, operand).rows == 1; }

int64_t BinaryReductionBlock(const Broadcast& bc, int operand) {
  const RowReaders rr = OperandRows(bc, operand);
  if (rr.rows <= 1) return 0;  // not broadcast, or not along leading dimensions only
  return formulas::ColumnSumBlockRows(bc.out[0], rr.rows, rr.cols) * rr.cols;
}

}  // namespace easyscale::graph

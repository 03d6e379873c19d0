// File: worker/src/graph/ops/row_readers.h
//
// An operand of a broadcast read by the rows of an [R, C] view of the output
// (broadcast along the leading dimensions, equal to the trailing ones: a
// bias, a scalar, the same shape): element e's readers are o = t*C + e, t
// ascending. One definition for the CPU's reduction blocks (broadcast.cc) and
// the CUDA kernels' paths (binary_elementwise.cu).
#pragma once

#include <cstdint>

namespace easyscale::graph {

// R and C; R = 1 for an operand of the output's shape, R = 0 for any other
// pattern.
struct RowReaders {
  int64_t rows = 0, cols = 1;
};

// `rank` output dimensions out[d] and the operand's element step along each
// (0 where it is broadcast).
inline RowReaders RowReadersOf(int rank, const int64_t* out, const int64_t* steps) {
  RowReaders rr;
  int64_t rows = 1, stride = 1;
  int d = rank;
  for (; d-- > 0;) {  // the trailing dimensions the operand has, contiguous
    if (out[d] != 1 && steps[d] != stride) break;
    stride *= out[d];
  }
  for (; d >= 0; --d) {  // the leading ones it is broadcast along
    if (out[d] != 1 && steps[d] != 0) return rr;
    rows *= out[d];
  }
  rr.rows = rows;
  rr.cols = stride;
  return rr;
}

}  // namespace easyscale::graph

// File: easyscale/worker/serialize.h
//
// Little-endian binary encoding for checkpoints and the digest. The reader
// checks every length against what is left, so a truncated or tampered file
// gives a Status naming what was being read, never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/worker/tensor.h"

namespace easyscale {

class ByteWriter {
 public:
  void U32(uint32_t v);
  void U64(uint64_t v);
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v);
  void Str(std::string_view s);
  void Floats(const std::vector<float>& v);
  // Shape then data.
  void TensorValue(const Tensor& t);
  const std::string& bytes() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  // `what` names the source in error messages (a file path).
  ByteReader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}
  Status U32(uint32_t* v, const char* field);
  Status U64(uint64_t* v, const char* field);
  Status I64(int64_t* v, const char* field);
  Status F64(double* v, const char* field);
  Status Str(std::string* s, const char* field);
  Status Floats(std::vector<float>* v, const char* field);
  // Reads a tensor whose shape must equal t->shape (checkpoint against model).
  Status TensorInto(Tensor* t, const char* field);
  bool AtEnd() const { return pos_ == data_.size(); }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  Status Take(size_t n, const char* field, const char** out);
  std::string_view data_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace easyscale

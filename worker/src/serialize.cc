#include "easyscale/worker/serialize.h"

#include <bit>
#include <cstring>

#include "easyscale/common/checks.h"

namespace easyscale {

static_assert(std::endian::native == std::endian::little, "the encoding assumes little-endian");

void ByteWriter::U32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
void ByteWriter::U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
void ByteWriter::F64(double v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
void ByteWriter::Str(std::string_view s) {
  U64(s.size());
  out_.append(s);
}
void ByteWriter::Floats(const std::vector<float>& v) {
  U64(v.size());
  out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}
void ByteWriter::TensorValue(const Tensor& t) {
  U32(static_cast<uint32_t>(t.shape.size()));
  for (int d : t.shape) U32(static_cast<uint32_t>(d));
  Floats(t.data);
}

Status ByteReader::Take(size_t n, const char* field, const char** out) {
  if (n > remaining()) {
    return absl::DataLossError(absl::StrCat(what_, ": truncated while reading ", field, " (need ",
                                            n, " bytes, ", remaining(), " left)"));
  }
  *out = data_.data() + pos_;
  pos_ += n;
  return absl::OkStatus();
}

Status ByteReader::U32(uint32_t* v, const char* field) {
  const char* p;
  ES_RETURN_IF_ERROR(Take(sizeof *v, field, &p));
  std::memcpy(v, p, sizeof *v);
  return absl::OkStatus();
}
Status ByteReader::U64(uint64_t* v, const char* field) {
  const char* p;
  ES_RETURN_IF_ERROR(Take(sizeof *v, field, &p));
  std::memcpy(v, p, sizeof *v);
  return absl::OkStatus();
}
Status ByteReader::I64(int64_t* v, const char* field) {
  uint64_t u;
  ES_RETURN_IF_ERROR(U64(&u, field));
  *v = static_cast<int64_t>(u);
  return absl::OkStatus();
}
Status ByteReader::F64(double* v, const char* field) {
  const char* p;
  ES_RETURN_IF_ERROR(Take(sizeof *v, field, &p));
  std::memcpy(v, p, sizeof *v);
  return absl::OkStatus();
}
Status ByteReader::Str(std::string* s, const char* field) {
  uint64_t n;
  ES_RETURN_IF_ERROR(U64(&n, field));
  const char* p;
  ES_RETURN_IF_ERROR(Take(n, field, &p));
  s->assign(p, n);
  return absl::OkStatus();
}
Status ByteReader::Floats(std::vector<float>* v, const char* field) {
  uint64_t n;
  ES_RETURN_IF_ERROR(U64(&n, field));
  if (n > remaining() / sizeof(float)) {
    return absl::DataLossError(absl::StrCat(what_, ": truncated while reading ", field, " (", n,
                                            " floats announced, ", remaining(), " bytes left)"));
  }
  const char* p;
  ES_RETURN_IF_ERROR(Take(n * sizeof(float), field, &p));
  v->resize(n);
  std::memcpy(v->data(), p, n * sizeof(float));
  return absl::OkStatus();
}
Status ByteReader::TensorInto(Tensor* t, const char* field) {
  uint32_t rank;
  ES_RETURN_IF_ERROR(U32(&rank, field));
  if (rank != t->shape.size()) {
    return absl::DataLossError(
        absl::StrCat(what_, ": ", field, " has rank ", rank, ", want ", t->shape.size()));
  }
  for (uint32_t i = 0; i < rank; ++i) {
    uint32_t d;
    ES_RETURN_IF_ERROR(U32(&d, field));
    if (static_cast<int>(d) != t->shape[i]) {
      return absl::DataLossError(absl::StrCat(what_, ": ", field, " has shape mismatch at dim ", i,
                                              " (", d, " vs ", t->shape[i], ")"));
    }
  }
  std::vector<float> data;
  ES_RETURN_IF_ERROR(Floats(&data, field));
  if (data.size() != t->size()) {
    return absl::DataLossError(
        absl::StrCat(what_, ": ", field, " has ", data.size(), " values, want ", t->size()));
  }
  t->data = std::move(data);
  return absl::OkStatus();
}

}  // namespace easyscale

#include "easyscale/worker/predict.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "easyscale/common/file_io.h"

namespace easyscale {

Predictions Predict(Model& model, std::vector<Tensor>& buffers, const Dataset& data,
                    const std::vector<uint32_t>& samples, KernelBackend& k) {
  for (const Tensor& b : buffers) k.Upload(b);
  for (const Param* p : model.params()) k.Upload(p->value);
  uint64_t unused_counter = 0;
  PassContext lc{false, &buffers, {}, &unused_counter, &k};
  const size_t chunk = static_cast<size_t>(model.FixedBatch());
  Predictions out;
  size_t correct = 0;
  std::vector<uint32_t> batch_samples;
  Tensor batch, host_logits;
  std::vector<int32_t> labels;
  IndexTensor predicted;
  for (size_t begin = 0; begin < samples.size(); begin += chunk) {
    const size_t end = std::min(samples.size(), begin + chunk);
    batch_samples.assign(samples.begin() + begin, samples.begin() + end);
    const size_t counted = batch_samples.size();
    batch_samples.resize(chunk, batch_samples.front());  // the last chunk padded
    if (end < samples.size()) {  // the next chunk decodes while this one computes
      PrefetchSamples(
          data, std::vector<uint32_t>(samples.begin() + end,
                                      samples.begin() + std::min(samples.size(), end + chunk)));
    }
    MakeBatch(data, batch_samples, nullptr, &batch, &labels);
    k.Upload(batch);
    const Tensor& logits = model.Forward(batch, lc);
    const int rows = logits.dim(0), classes = logits.dim(1);
    predicted.Resize({rows});
    k.Argmax(rows, classes, k.At(logits), k.At(predicted));
    k.Download(predicted);
    host_logits.Resize(logits.shape);
    k.Copy(logits.bytes(), k.At(logits), k.At(host_logits));
    k.Download(host_logits);
    out.classes = classes;
    out.logits.insert(out.logits.end(), host_logits.data.begin(),
                      host_logits.data.begin() + counted * static_cast<size_t>(classes));
    for (size_t i = 0; i < counted; ++i) correct += predicted.data[i] == labels[i];
  }
  out.accuracy = samples.empty() ? 0.0 : static_cast<double>(correct) / samples.size();
  return out;
}

Status WriteNpy(const std::string& path, const std::vector<int>& shape,
                const std::vector<float>& values) {
  std::string header =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (",
                   absl::StrJoin(shape, ", "), shape.size() == 1 ? ",), }" : "), }");
  // Magic, version 1.0 and the u16 header size take 10 bytes; the header
  // ends in a newline and pads the whole preamble to a multiple of 64.
  constexpr size_t kPreamble = 10, kAlign = 64;
  header.append((kAlign - (kPreamble + header.size() + 1) % kAlign) % kAlign, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return WriteFileAtomic(path, out);
}

}  // namespace easyscale

// File: worker/src/output/safetensors_writer.h
//
// The safetensors format (huggingface/safetensors): u64 little-endian header
// size N, N bytes of JSON header {"<name>": {"dtype", "shape", "data_offsets":
// [begin, end]}, ..., "__metadata__": {string: string}}, then the tensors'
// bytes. Written here with the tensors in ascending name order, back to back
// (the format allows no holes), and the header padded with spaces so that the
// data starts at an 8-byte boundary: equal tensors give equal bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace easyscale {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "I64"
  std::vector<int64_t> shape;
  std::string_view bytes;  // little-endian elements, row-major
};

// The file's bytes. Names must be distinct (the caller checks).
std::string EncodeSafetensors(std::vector<SafetensorsEntry> entries,
                              const std::map<std::string, std::string>& metadata);

}  // namespace easyscale

// File: worker/src/data/testing/image_files.h
//
// Test-only: writes images and tensor files the data pipeline reads, with
// the same libraries (libpng, libjpeg-turbo), so tests build image folders
// and bad files without Python.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace easyscale::data::testing {

// 8-bit PNG of an HWC image with `channels` 1 (grey), 2 (grey+alpha), 3
// (RGB) or 4 (RGBA).
std::string EncodePng(const std::vector<uint8_t>& hwc, int height, int width, int channels);
// Baseline JPEG of an HWC image with 1 or 3 channels, at `quality`.
std::string EncodeJpeg(const std::vector<uint8_t>& hwc, int height, int width, int channels,
                       int quality = 95);
// A safetensors file of the named tensors: (name, dtype "F32"/"U8"/"I64"...,
// shape, raw little-endian bytes), in order; `metadata` is the
// "__metadata__" object's JSON text, or empty.
struct RawTensorSpec {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
std::string EncodeSafetensors(const std::vector<RawTensorSpec>& tensors,
                              const std::string& metadata = "");
// A version-1 .npy file of `descr` ('<f4', '|u1', '<i8', ...) and `shape`.
std::string EncodeNpy(const std::string& descr, const std::vector<int64_t>& shape,
                      const std::string& bytes);

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

}  // namespace easyscale::data::testing

// File: worker/src/data/image_decode.h
//
// JPEG (Debian's libjpeg-turbo) and PNG (libpng) files to 8-bit pixels with
// the channel count a model takes: a pure function of the file's bytes, so any
// thread may decode any file without changing a bit of training.
//
// JPEG: JDCT_ISLOW, the integer IDCT whose SIMD and C paths libjpeg-turbo keeps
// bit-identical (the float and fast IDCTs differ between them), default (fancy)
// chroma upsampling, colour conversion by the library; 3 channels come out as
// RGB, 1 channel as the library's luminance (JCS_GRAYSCALE).
// PNG: 8 and 16 bits (16 keep their high byte), palette expanded, tRNS and
// alpha dropped (never composited), grey expanded to RGB for 3 channels, RGB
// reduced to grey for 1 channel with the integer formula
//   Y = (77 R + 150 G + 29 B + 128) >> 8   (BT.601 weights in 1/256ths).
// JPEG's own RGB-to-grey conversion (for 1 channel) uses the same BT.601
// weights in the library's fixed point.
//
// A corrupt file is an error naming it (libjpeg's errors and its warnings
// about corrupt data, through longjmp: the process never exits), as are
// images larger than kMaxImagePixels.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::data {

struct DecodedImage {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // HWC, row-major
  size_t bytes() const { return pixels.size(); }
};

// The largest image decoded (height * width): 64 Mpx.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

// Decodes `bytes` (a JPEG or a PNG, told by its signature) to `channels`
// (1 or 3) channels; `path` names the file in errors.
StatusOr<DecodedImage> DecodeImage(std::string_view bytes, int channels, const std::string& path);

}  // namespace easyscale::data

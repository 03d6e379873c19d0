// File: worker/src/data/image_transform.h
//
// The geometric part of the image pipeline, in one documented operation order
// (the worker builds with -ffp-contract=off: no fma the source does not
// spell out), so every worker computes the same bits:
//
// Training: RandomResizedCrop as torchvision draws it (scale [0.08, 1], ratio
// [3/4, 4/3], up to 10 attempts, then its central fallback), then a horizontal
// flip with probability 1/2; evaluation: CenterBox, the largest centred box
// with the output's aspect ratio (a resize of the shorter side followed by a
// centre crop, without torchvision's 256/224 margin). Either box is resized
// to the model's H x W by ResizeCrop.
#pragma once

#include "data/image_decode.h"
#include "easyscale/worker/philox.h"

namespace easyscale::data {

struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// Draws, from `rng`, in this order per attempt: scale s = 0.08 + 0.92 u
// (float), log-ratio l = log(3/4) + (log(4/3) - log(3/4)) u (float, the
// project's own Log and Exp), then w = round(sqrt(area * s * exp(l))) and
// h = round(sqrt(area * s / exp(l))) in double (IEEE sqrt, round half to
// even, as Python's round); a fitting box takes top = NextBelow(H - h + 1),
// then left = NextBelow(W - w + 1). After 10 misses: torchvision's central
// crop of the whole image clamped to the ratio range (no draws).
CropBox RandomResizedCrop(PhiloxStream& rng, int height, int width);

// The largest box of aspect out_w : out_h centred in a height x width image
// (integer arithmetic: the long side is (short * out_long + out_short / 2) /
// out_short pixels, offsets round down).
CropBox CenterBox(int height, int width, int out_height, int out_width);

// Bilinear resize (align_corners = false, no antialiasing) of `box` of an HWC
// image to dst [C, out_height, out_width], values in [0, 255], mirrored
// horizontally when `flip`. Per output pixel (y, x), in float:
//   sy = max(0, (y + 0.5) * (box.h / out_h) - 0.5), y0 = floor(sy),
//   y1 = min(y0 + 1, box.h - 1), wy = sy - y0 (x the same way);
//   top = p(y0, x0) + wx * (p(y0, x1) - p(y0, x0)),
//   bottom = p(y1, x0) + wx * (p(y1, x1) - p(y1, x0)),
//   value = top + wy * (bottom - top);
// with flip, output column x is column out_w - 1 - x of the unflipped result.
void ResizeCrop(const DecodedImage& image, const CropBox& box, bool flip, int out_height,
                int out_width, float* dst);

}  // namespace easyscale::data

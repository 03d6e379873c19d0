#include "data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "easyscale/worker/detmath.h"

namespace easyscale::data {

CropBox RandomResizedCrop(PhiloxStream& rng, int height, int width) {
  constexpr float kMinScale = 0.08f, kMinRatio = 3.0f / 4.0f, kMaxRatio = 4.0f / 3.0f;
  const double area = static_cast<double>(height) * width;
  const float log_min = detmath::Log(kMinRatio), log_max = detmath::Log(kMaxRatio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const float scale = kMinScale + (1.0f - kMinScale) * rng.NextUniform();
    const float ratio = detmath::Exp(log_min + (log_max - log_min) * rng.NextUniform());
    const double target = area * static_cast<double>(scale);
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target * static_cast<double>(ratio))));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target / static_cast<double>(ratio))));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = static_cast<int>(rng.NextBelow(static_cast<uint32_t>(height - h + 1)));
      const int left = static_cast<int>(rng.NextBelow(static_cast<uint32_t>(width - w + 1)));
      return {top, left, h, w};
    }
  }
  // torchvision's fallback: the whole image, cut to the nearest allowed ratio.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < static_cast<double>(kMinRatio)) {
    h = static_cast<int>(std::nearbyint(w / static_cast<double>(kMinRatio)));
  } else if (in_ratio > static_cast<double>(kMaxRatio)) {
    w = static_cast<int>(std::nearbyint(h * static_cast<double>(kMaxRatio)));
  }
  h = std::min(h, height);
  w = std::min(w, width);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

CropBox CenterBox(int height, int width, int out_height, int out_width) {
  // Compare height / width with out_height / out_width without division.
  const int64_t lhs = static_cast<int64_t>(height) * out_width;
  const int64_t rhs = static_cast<int64_t>(width) * out_height;
  int h = height, w = width;
  if (lhs > rhs) {  // taller than the output: keep the width
    h = static_cast<int>((static_cast<int64_t>(width) * out_height + out_width / 2) / out_width);
  } else if (lhs < rhs) {  // wider: keep the height
    w = static_cast<int>((static_cast<int64_t>(height) * out_width + out_height / 2) / out_height);
  }
  h = std::clamp(h, 1, height);
  w = std::clamp(w, 1, width);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

namespace {

// Source index pair and weight of each output position along one axis.
struct Tap {
  int lo, hi;
  float weight;
};

std::vector<Tap> Taps(int in, int out) {
  std::vector<Tap> taps(static_cast<size_t>(out));
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int i = 0; i < out; ++i) {
    const float s = std::max(0.0f, (static_cast<float>(i) + 0.5f) * scale - 0.5f);
    const int lo = static_cast<int>(s);
    taps[static_cast<size_t>(i)] = {lo, std::min(lo + 1, in - 1), s - static_cast<float>(lo)};
  }
  return taps;
}

}  // namespace

void ResizeCrop(const DecodedImage& image, const CropBox& box, bool flip, int out_height,
                int out_width, float* dst) {
  const std::vector<Tap> rows = Taps(box.height, out_height);
  std::vector<Tap> cols = Taps(box.width, out_width);
  const int C = image.channels;
  const size_t stride = static_cast<size_t>(image.width) * C;
  // Columns as element offsets within a row of the crop, once.
  for (Tap& t : cols) {
    t.lo = (box.left + t.lo) * C;
    t.hi = (box.left + t.hi) * C;
  }
  for (int y = 0; y < out_height; ++y) {
    const Tap& r = rows[static_cast<size_t>(y)];
    const uint8_t* row0 = image.pixels.data() + static_cast<size_t>(box.top + r.lo) * stride;
    const uint8_t* row1 = image.pixels.data() + static_cast<size_t>(box.top + r.hi) * stride;
    for (int c = 0; c < C; ++c) {
      float* out = dst + (static_cast<size_t>(c) * out_height + y) * out_width;
      for (int x = 0; x < out_width; ++x) {
        const Tap& t = cols[static_cast<size_t>(x)];
        const float p00 = row0[t.lo + c], p01 = row0[t.hi + c];
        const float p10 = row1[t.lo + c], p11 = row1[t.hi + c];
        const float top = p00 + t.weight * (p01 - p00);
        const float bottom = p10 + t.weight * (p11 - p10);
        out[flip ? out_width - 1 - x : x] = top + r.weight * (bottom - top);
      }
    }
  }
}

}  // namespace easyscale::data

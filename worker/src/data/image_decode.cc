#include "data/image_decode.h"

#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace easyscale::data {
namespace {

// libjpeg reports errors through error_exit, which must not return: it jumps
// back to the decoder with the library's message. Warnings (msg_level -1)
// report corrupt or truncated data; they are errors here, so that every file
// that trains decoded cleanly. The image lives here too: objects changed
// after setjmp must be reached through memory the library was given, never
// through registers a jump may have left stale.
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  DecodedImage image;
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  cinfo->err->format_message(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

void JpegEmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0) JpegErrorExit(cinfo);  // a warning: corrupt data
}

Status TooLarge(const std::string& path, int64_t height, int64_t width) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": image of ", width, "x", height,
                                                 " pixels is larger than the ", kMaxImagePixels,
                                                 " pixels an image may have"));
}

StatusOr<DecodedImage> DecodeJpeg(std::string_view bytes, int channels, const std::string& path) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = JpegErrorExit;
  errors.mgr.emit_message = JpegEmitMessage;
  DecodedImage& image = errors.image;
  // Nothing with a destructor is created between here and the library calls
  // that may jump back.
  if (setjmp(errors.jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    return absl::DataLossError(absl::StrCat(path, ": corrupt JPEG: ", errors.message));
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<int64_t>(cinfo.image_width) * cinfo.image_height > kMaxImagePixels) {
    jpeg_destroy_decompress(&cinfo);
    return TooLarge(path, cinfo.image_height, cinfo.image_width);
  }
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  image.height = static_cast<int>(cinfo.output_height);
  image.width = static_cast<int>(cinfo.output_width);
  image.channels = cinfo.output_components;
  image.pixels.resize(static_cast<size_t>(image.height) * image.width * image.channels);
  const size_t stride = static_cast<size_t>(image.width) * image.channels;
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = image.pixels.data() + cinfo.output_scanline * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return std::move(image);
}

// libpng's errors jump back the same way; its warnings (ancillary chunks, an
// sRGB profile) change no pixel and are ignored. The buffers live here for
// the same reason as JpegErrors::image.
struct PngInput {
  std::string_view bytes;
  size_t offset = 0;
  char message[256] = {};
  std::vector<uint8_t> decoded;
  std::vector<png_bytep> rows;
};

void PngError(png_structp png, png_const_charp message) {
  auto* in = static_cast<PngInput*>(png_get_error_ptr(png));
  std::snprintf(in->message, sizeof in->message, "%s", message);
  png_longjmp(png, 1);
}

void PngWarning(png_structp, png_const_charp) {}

void PngRead(png_structp png, png_bytep out, png_size_t n) {
  auto* in = static_cast<PngInput*>(png_get_io_ptr(png));
  if (n > in->bytes.size() - in->offset) png_error(png, "truncated file");
  std::memcpy(out, in->bytes.data() + in->offset, n);
  in->offset += n;
}

// BT.601 luminance in 1/256ths, rounded: the documented grey of an RGB PNG.
uint8_t Luminance(const uint8_t* rgb) {
  return static_cast<uint8_t>((77 * rgb[0] + 150 * rgb[1] + 29 * rgb[2] + 128) >> 8);
}

StatusOr<DecodedImage> DecodePng(std::string_view bytes, int channels, const std::string& path) {
  PngInput in{bytes};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &in, PngError, PngWarning);
  if (png == nullptr) return absl::ResourceExhaustedError(path + ": cannot start libpng");
  png_infop info = png_create_info_struct(png);
  std::vector<uint8_t>& decoded = in.decoded;
  std::vector<png_bytep>& rows = in.rows;
  if (setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_read_struct(&png, &info, nullptr);
    return absl::DataLossError(absl::StrCat(path, ": corrupt PNG: ", in.message));
  }
  if (info == nullptr) png_error(png, "out of memory");
  png_set_read_fn(png, &in, PngRead);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  if (static_cast<int64_t>(width) * height > kMaxImagePixels) {
    png_destroy_read_struct(&png, &info, nullptr);
    return TooLarge(path, height, width);
  }
  const int color = png_get_color_type(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int stored = png_get_channels(png, info);  // 1 (grey) or 3 (RGB)
  decoded.resize(static_cast<size_t>(height) * width * stored);
  rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) {
    rows[y] = decoded.data() + static_cast<size_t>(y) * width * stored;
  }
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);

  DecodedImage image;
  image.height = static_cast<int>(height);
  image.width = static_cast<int>(width);
  image.channels = channels;
  if (stored == channels) {
    image.pixels = std::move(decoded);
    return image;
  }
  const size_t n = static_cast<size_t>(height) * width;
  image.pixels.resize(n * channels);
  for (size_t i = 0; i < n; ++i) {
    if (channels == 1) {
      image.pixels[i] = Luminance(&decoded[i * 3]);
    } else {
      std::memset(&image.pixels[i * 3], decoded[i], 3);
    }
  }
  return image;
}

}  // namespace

StatusOr<DecodedImage> DecodeImage(std::string_view bytes, int channels, const std::string& path) {
  if (channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the model takes ", channels, " channels; images decode to 1 (grey) or 3 (RGB)"));
  }
  static constexpr unsigned char kJpeg[] = {0xFF, 0xD8, 0xFF};
  static constexpr unsigned char kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= sizeof kJpeg && std::memcmp(bytes.data(), kJpeg, sizeof kJpeg) == 0) {
    return DecodeJpeg(bytes, channels, path);
  }
  if (bytes.size() >= sizeof kPng && std::memcmp(bytes.data(), kPng, sizeof kPng) == 0) {
    return DecodePng(bytes, channels, path);
  }
  return absl::DataLossError(path + ": neither a JPEG nor a PNG file (bad signature)");
}

}  // namespace easyscale::data

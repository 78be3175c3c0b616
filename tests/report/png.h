// A minimal PNG reader for tests: 8-bit RGB or RGBA, non-interlaced (what
// Chromium's screenshots are), decoded with zlib.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace meshtrain::testing {

struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // rows of width x channels bytes
};

inline uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

inline Image read_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string f = ss.str();
  if (f.size() < 8 || f.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) throw std::runtime_error(path + " is not a PNG");
  Image img;
  std::string idat;
  for (size_t at = 8; at + 8 <= f.size();) {
    const uint32_t len = be32(f, at);
    const std::string type = f.substr(at + 4, 4);
    if (type == "IHDR") {
      img.width = int(be32(f, at + 8));
      img.height = int(be32(f, at + 12));
      const int depth = uint8_t(f[at + 16]), color = uint8_t(f[at + 17]), interlace = uint8_t(f[at + 20]);
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0)
        throw std::runtime_error(path + ": only 8-bit RGB(A) non-interlaced PNGs are read");
      img.channels = color == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      idat += f.substr(at + 8, len);
    }
    at += 12 + len;
  }
  const size_t stride = size_t(img.width) * img.channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf n = raw.size();
  if (uncompress(raw.data(), &n, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK || n != raw.size())
    throw std::runtime_error(path + ": bad image data");
  img.pixels.assign(stride * img.height, 0);
  const int bpp = img.channels;
  for (int y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* src = &raw[y * (stride + 1) + 1];
    uint8_t* row = &img.pixels[y * stride];
    const uint8_t* up = y > 0 ? &img.pixels[(y - 1) * stride] : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= size_t(bpp) ? row[x - bpp] : 0, b = up ? up[x] : 0, c = (up && x >= size_t(bpp)) ? up[x - bpp] : 0;
      int pred = 0;
      switch (filter) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default: throw std::runtime_error(path + ": bad filter");
      }
      row[x] = uint8_t(src[x] + pred);
    }
  }
  return img;
}

}  // namespace meshtrain::testing

#include "output/safetensors_writer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace easyscale {

std::string EncodeSafetensors(std::vector<SafetensorsEntry> entries,
                              const std::map<std::string, std::string>& metadata) {
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.name < b.name; });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    header[e.name] = {{"dtype", e.dtype},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string text = header.dump();  // keys sorted: the same tensors give the same header
  constexpr size_t kAlign = 8;
  text.append((kAlign - (sizeof(uint64_t) + text.size()) % kAlign) % kAlign, ' ');
  std::string out;
  out.reserve(sizeof(uint64_t) + text.size() + offset);
  const uint64_t size = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  out += text;
  for (const SafetensorsEntry& e : entries) out.append(e.bytes);
  return out;
}

}  // namespace easyscale

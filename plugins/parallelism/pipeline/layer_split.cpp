#include "layer_split.hpp"

#include <cctype>
#include <string>

namespace mh::pipeline {

std::vector<int32_t> even_split(int64_t layers, int32_t chunks) {
  std::vector<int32_t> counts(static_cast<size_t>(chunks), static_cast<int32_t>(layers / chunks));
  for (int64_t i = 0; i < layers % chunks; ++i) ++counts[static_cast<size_t>(i)];
  return counts;
}

namespace {

bool is_positive_number(const std::string& entry) {
  if (entry.empty() || entry.size() > 9) return false;
  for (char c : entry)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return std::stoi(entry) > 0;
}

std::string trimmed(const std::string& s) {
  size_t first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace

std::vector<int32_t> parse_layer_counts(const std::string& text, const std::string& key,
                                        plan::Problems& problems) {
  std::vector<int32_t> counts;
  for (size_t begin = 0;;) {
    size_t end = text.find(',', begin);
    std::string entry = trimmed(text.substr(begin, end - begin));
    if (is_positive_number(entry))
      counts.push_back(std::stoi(entry));
    else
      problems.add(key + " = \"" + text + "\": \"" + entry +
                   "\" is not a positive whole number of layers");
    if (end == std::string::npos) return counts;
    begin = end + 1;
  }
}

std::string format_layer_counts(const std::vector<int32_t>& counts) {
  std::string out;
  for (int32_t c : counts) {
    if (!out.empty()) out += ',';
    out += std::to_string(c);
  }
  return out;
}

std::vector<MH_StageLayers> assign_layers(const std::vector<int32_t>& counts, int32_t stages) {
  std::vector<MH_StageLayers> layers;
  int32_t first = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    int32_t model_chunk = static_cast<int32_t>(k);
    layers.push_back(MH_StageLayers{model_chunk % stages, model_chunk / stages, first, counts[k]});
    first += counts[k];
  }
  return layers;
}

}  // namespace mh::pipeline

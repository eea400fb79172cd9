#include "data/byte_tokenizer.hpp"

#include <megahost/error.hpp>

namespace mh::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    require(id >= 0 && id <= kEod, "byte tokenizer: cannot decode token id " + std::to_string(id) +
                                       ": ids are 0..255 (bytes) and 256 (end of document)");
    if (id == kEod) {
      text += "<|endoftext|>";
    } else {
      text.push_back(static_cast<char>(id));
    }
  }
  return text;
}

}  // namespace mh::data

#include "data/bpe_tokenizer.hpp"

#include <megahost/error.hpp>

#include <algorithm>

namespace mh::data {

BpeTokenizer::BpeTokenizer(const BpeParts& parts)
    : source_(parts.source),
      pretokenizer_(parts.pattern),
      bpe_(parts.vocab, parts.merges, parts.source, parts.ignore_merges),
      add_prefix_space_(parts.add_prefix_space),
      special_tokens_(parts.special_tokens),
      vocab_size_(bpe_.vocab_size()),
      eod_(parts.eod) {
  // At one position the longest special token wins, as in `tokenizers`.
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [text, id] : special_tokens_) {
    special_text_.emplace(id, text);
    if (!text.empty()) special_first_byte_[static_cast<unsigned char>(text[0])] = true;
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  size_t done = 0;
  for (size_t at = 0; at < text.size() && !special_tokens_.empty(); ++at) {
    if (!special_first_byte_[static_cast<unsigned char>(text[at])]) continue;
    for (const auto& [special, id] : special_tokens_) {
      if (special.empty() || text.compare(at, special.size(), special) != 0) continue;
      encode_text(text.substr(done, at - done), ids);
      ids.push_back(id);
      done = at + special.size();
      at = done - 1;
      break;
    }
  }
  encode_text(text.substr(done), ids);
  return ids;
}

// One stretch of text without special tokens.
void BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  std::string prefixed;
  if (add_prefix_space_ && text.front() != ' ') {
    // Built piecewise: GCC 12 warns falsely (-Wrestrict) on " " + std::string.
    prefixed.append(1, ' ').append(text);
    text = prefixed;
  }
  for (std::string_view piece : pretokenizer_.split(text)) bpe_.encode_piece(piece, ids);
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (auto it = special_text_.find(id); it != special_text_.end()) {
      text += it->second;
      continue;
    }
    require(id >= 0 && id < bpe_.vocab_size(),
            "cannot decode token id " + std::to_string(id) + ": the vocabulary of " + source_ +
                " has ids 0.." + std::to_string(vocab_size_ - 1) +
                (vocab_size_ > bpe_.vocab_size() ? " (some of them special)" : ""));
    text += bpe_.token_bytes(id);
  }
  return text;
}

}  // namespace mh::data

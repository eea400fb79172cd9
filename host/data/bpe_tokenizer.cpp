#include "data/bpe_tokenizer.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <cctype>

#include "data/text_input.hpp"

namespace mh::data {
namespace {

constexpr std::string_view kMeta = "\u2581";  // "▁", SentencePiece's space
constexpr std::string_view kReplacementCharacter = "\uFFFD";

// The byte a "<0xNN>" token stands for, or -1.
int fallback_byte(std::string_view token) {
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>' || !hex(token[3]) || !hex(token[4])) return -1;
  return std::stoi(std::string(token.substr(3, 2)), nullptr, 16);
}

}  // namespace

BpeTokenizer::BpeTokenizer(const BpeParts& parts)
    : source_(parts.source),
      pretokenizer_(parts.pattern),
      bpe_(parts.vocab, parts.merges, parts.source, parts.ignore_merges,
           parts.metaspace ? BpeAlphabet::kCharacters : BpeAlphabet::kBytes, parts.metaspace ? parts.metaspace->unk : -1),
      add_prefix_space_(parts.add_prefix_space),
      metaspace_(parts.metaspace),
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
      encode_text(text.substr(done, at - done), done == 0, ids);
      ids.push_back(id);
      done = at + special.size();
      at = done - 1;
      break;
    }
  }
  encode_text(text.substr(done), done == 0, ids);
  return ids;
}

void BpeTokenizer::encode_text(std::string_view text, bool at_start, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  if (metaspace_) return encode_metaspace(text, at_start, ids);
  std::string prefixed;
  if (add_prefix_space_ && text.front() != ' ') {
    // Built piecewise: GCC 12 warns falsely (-Wrestrict) on " " + std::string.
    prefixed.append(1, ' ').append(text);
    text = prefixed;
  }
  for (std::string_view piece : pretokenizer_.split(text)) bpe_.encode_piece(piece, ids);
}

void BpeTokenizer::encode_metaspace(std::string_view text, bool at_start, std::vector<int32_t>& ids) const {
  const int64_t bad = invalid_utf8_at(text);
  require(bad < 0, "text is not valid UTF-8 at byte " + std::to_string(bad) +
                       "; convert the input to UTF-8 or use --tokenizer=byte");
  using Prepend = Metaspace::Prepend;
  std::string spelled;
  spelled.reserve(text.size() + 2 * kMeta.size());
  for (char c : text) c == ' ' ? void(spelled += kMeta) : spelled.push_back(c);
  // The normalizer prepends before spaces become "▁", so " x" gets two; the
  // pre-tokenizer after, and only where no "▁" begins the text already.
  const Prepend p = metaspace_->prepend;
  if (p == Prepend::kEverySegment ||
      ((p == Prepend::kAlways || (p == Prepend::kFirst && at_start)) && !spelled.starts_with(kMeta))) {
    spelled.insert(0, kMeta);
  }
  const std::string_view all = spelled;
  if (!metaspace_->split) return bpe_.encode_piece(all, ids);
  // Each "▁" begins a piece (tokenizers' MergedWithNext).
  size_t start = 0;
  for (size_t at = all.find(kMeta, 1); at != std::string_view::npos; at = all.find(kMeta, at + kMeta.size())) {
    bpe_.encode_piece(all.substr(start, at - start), ids);
    start = at;
  }
  bpe_.encode_piece(all.substr(start), ids);
}

const std::string& BpeTokenizer::token_text(int32_t id) const {
  if (auto it = special_text_.find(id); it != special_text_.end()) return it->second;
  require(id >= 0 && id < bpe_.vocab_size(),
          "cannot decode token id " + std::to_string(id) + ": the vocabulary of " + source_ + " has ids 0.." +
              std::to_string(vocab_size_ - 1) + (vocab_size_ > bpe_.vocab_size() ? " (some of them special)" : ""));
  return bpe_.token_bytes(id);
}

std::string BpeTokenizer::decode_metaspace(std::span<const int32_t> ids) const {
  std::string text, bytes;
  auto flush_bytes = [&] {
    if (invalid_utf8_at(bytes) < 0) {
      text += bytes;
    } else {
      for (size_t i = 0; i < bytes.size(); ++i) text += kReplacementCharacter;
    }
    bytes.clear();
  };
  for (int32_t id : ids) {
    const std::string& token = token_text(id);
    if (const int byte = fallback_byte(token); byte >= 0) {
      bytes.push_back(static_cast<char>(byte));
      continue;
    }
    flush_bytes();
    for (size_t at = 0; at < token.size();) {
      if (token.compare(at, kMeta.size(), kMeta) == 0) {
        text.push_back(' ');
        at += kMeta.size();
      } else {
        text.push_back(token[at++]);
      }
    }
  }
  flush_bytes();
  if (metaspace_->strip_space && text.starts_with(' ')) text.erase(0, 1);
  return text;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  if (metaspace_) return decode_metaspace(ids);
  std::string text;
  for (int32_t id : ids) text += token_text(id);
  return text;
}

}  // namespace mh::data

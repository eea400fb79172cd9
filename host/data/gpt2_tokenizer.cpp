#include "data/gpt2_tokenizer.hpp"

#include <megahost/error.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <climits>
#include <fstream>

namespace mh::data {
namespace {

constexpr char kEndOfText[] = "<|endoftext|>";
constexpr int kMaxVocabDepth = 2;  // the object, and a value inside it

// GPT-2 gives every byte a printable stand-in so that symbols never hold
// whitespace or control characters: the printable Latin-1 bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves and the other 68 bytes take the
// code points 256, 257, ... in byte order.
std::array<char32_t, 256> byte_code_points() {
  std::array<char32_t, 256> code_points{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    code_points[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return code_points;
}

std::string utf8(char32_t c) {
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  // Stand-ins are below U+0800, so two bytes always suffice.
  return {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
}

// The length of the UTF-8 character that starts with `lead`; vocab.json was
// parsed as JSON, so its text is valid UTF-8.
size_t utf8_length(unsigned char lead) {
  return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

// byte -> its stand-in symbol, UTF-8 encoded.
const std::array<std::string, 256>& byte_symbols() {
  static const std::array<std::string, 256> symbols = [] {
    std::array<std::string, 256> s;
    auto code_points = byte_code_points();
    for (int b = 0; b < 256; ++b) s[b] = utf8(code_points[b]);
    return s;
  }();
  return symbols;
}

// A vocabulary entry's symbols back to the bytes they stand for. Characters
// that are no stand-in (only possible in added special tokens) are kept as
// their own UTF-8.
std::string symbols_to_bytes(const std::string& token) {
  static const std::unordered_map<std::string, char> stand_in_to_byte = [] {
    std::unordered_map<std::string, char> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_symbols()[b], static_cast<char>(b));
    return m;
  }();
  std::string bytes;
  for (size_t i = 0; i < token.size();) {
    const size_t length = utf8_length(static_cast<unsigned char>(token[i]));
    std::string character = token.substr(i, length);
    auto it = stand_in_to_byte.find(character);
    bytes += it != stand_in_to_byte.end() ? std::string(1, it->second) : character;
    i += length;
  }
  return bytes;
}

std::ifstream open_or_throw(const std::string& path, const char* what, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  require(in.is_open(),
          std::string("gpt2 tokenizer: cannot open ") + what + " '" + path +
              "'; pass its path with --" + flag,
          MH_NOT_FOUND);
  return in;
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_file, const std::string& merges_file)
    : vocab_file_(vocab_file) {
  load_vocab(vocab_file);
  load_merges(merges_file);
}

void Gpt2Tokenizer::load_vocab(const std::string& vocab_file) {
  std::ifstream in = open_or_throw(vocab_file, "vocab file", "vocab_file");
  // A vocabulary is one flat object. Refusing depth while parsing keeps a
  // hostile file nested 50,000 deep from reaching the recursive dump below.
  const auto flat = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    require(depth <= kMaxVocabDepth, "gpt2 tokenizer: " + vocab_file + " nests deeper than " +
                                         std::to_string(kMaxVocabDepth) +
                                         " levels; a vocabulary is one JSON object of symbol -> id");
    return true;
  };
  nlohmann::json vocab = nlohmann::json::parse(in, flat, /*allow_exceptions=*/false);
  require(vocab.is_object(),
          "gpt2 tokenizer: " + vocab_file +
              " is not a JSON object of symbol -> id (is it GPT-2's vocab.json?)");
  token_bytes_.assign(vocab.size(), {});
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [symbol, id_json] : vocab.items()) {
    int64_t id = id_json.is_number_integer() ? id_json.get<int64_t>() : -1;
    require(id >= 0 && id < static_cast<int64_t>(vocab.size()) && !seen[id],
            "gpt2 tokenizer: " + vocab_file + ": the id of '" + symbol + "' is " + id_json.dump() +
                "; ids must be 0.." + std::to_string(vocab.size() - 1) + ", each used once");
    seen[id] = true;
    ids_.emplace(symbol, static_cast<int32_t>(id));
    token_bytes_[id] = symbols_to_bytes(symbol);
  }
  auto eod = ids_.find(kEndOfText);
  require(eod != ids_.end(), "gpt2 tokenizer: " + vocab_file + " has no " + kEndOfText +
                                 ", which marks the end of a document; add it to the vocabulary");
  eod_ = eod->second;
}

void Gpt2Tokenizer::load_merges(const std::string& merges_file) {
  std::ifstream in = open_or_throw(merges_file, "merges file", "merges_file");
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    size_t space = line.find(' ');
    bool two_symbols = space != std::string::npos && space > 0 && space + 1 < line.size() &&
                       line.find(' ', space + 1) == std::string::npos;
    require(two_symbols, "gpt2 tokenizer: " + merges_file + ":" + std::to_string(line_number) +
                             ": expected two symbols separated by one space, found '" + line + "'");
    // First occurrence wins: a repeated merge keeps its better rank.
    merge_ranks_.emplace(line, static_cast<int32_t>(merge_ranks_.size()));
  }
}

int32_t Gpt2Tokenizer::merge_rank(const std::string& left, const std::string& right) const {
  auto it = merge_ranks_.find(left + ' ' + right);
  return it == merge_ranks_.end() ? INT32_MAX : it->second;
}

std::vector<std::string> Gpt2Tokenizer::merge(std::string_view piece) const {
  std::vector<std::string> symbols;
  for (char c : piece) symbols.push_back(byte_symbols()[static_cast<unsigned char>(c)]);
  while (symbols.size() > 1) {
    int32_t best = INT32_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      int32_t rank = merge_rank(symbols[i], symbols[i + 1]);
      if (rank < best) best = rank, at = i;
    }
    if (best == INT32_MAX) break;
    // Merge every occurrence of the best pair, left to right, as GPT-2 does.
    const std::string left = symbols[at], right = symbols[at + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(left + right);
        i += 2;
      } else {
        merged.push_back(symbols[i++]);
      }
    }
    symbols = std::move(merged);
  }
  return symbols;
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (std::string_view piece : pretokenizer_.split(text)) {
    for (const std::string& symbol : merge(piece)) {
      auto it = ids_.find(symbol);
      require(it != ids_.end(), "gpt2 tokenizer: symbol '" + symbol + "' is not in " + vocab_file_ +
                                    "; a byte-level vocabulary must hold all 256 byte symbols");
      ids.push_back(it->second);
    }
  }
  return ids;
}

std::string Gpt2Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  for (int32_t id : ids) {
    require(id >= 0 && id < vocab_size(), "gpt2 tokenizer: cannot decode token id " +
                                              std::to_string(id) + ": the vocabulary of " +
                                              vocab_file_ + " has ids 0.." +
                                              std::to_string(vocab_size() - 1));
    text += token_bytes_[id];
  }
  return text;
}

}  // namespace mh::data

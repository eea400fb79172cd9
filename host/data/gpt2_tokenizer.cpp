#include "data/gpt2_tokenizer.hpp"

#include <megahost/error.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/regular_file.hpp"
#include "data/share_dir.hpp"

namespace mh::data {
namespace {

constexpr char kEndOfText[] = "<|endoftext|>";
constexpr int kMaxVocabDepth = 2;  // the object, and a value inside it

std::istringstream open_or_throw(const std::string& path, const char* what, const char* flag) {
  return std::istringstream(read_regular_file(
      path, std::string("gpt2 tokenizer: the ") + what + " cannot be read; pass its path with --" + flag));
}

void load_vocab(const std::string& vocab_file, BpeParts& parts) {
  std::istringstream in = open_or_throw(vocab_file, "vocab file", "vocab_file");
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
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [symbol, id_json] : vocab.items()) {
    int64_t id = id_json.is_number_integer() ? id_json.get<int64_t>() : -1;
    require(id >= 0 && id < static_cast<int64_t>(vocab.size()) && !seen[id],
            "gpt2 tokenizer: " + vocab_file + ": the id of '" + symbol + "' is " + id_json.dump() +
                "; ids must be 0.." + std::to_string(vocab.size() - 1) + ", each used once");
    seen[id] = true;
    parts.vocab.emplace(symbol, static_cast<int32_t>(id));
  }
  auto eod = parts.vocab.find(kEndOfText);
  require(eod != parts.vocab.end(),
          "gpt2 tokenizer: " + vocab_file + " has no " + kEndOfText +
              ", which marks the end of a document; add it to the vocabulary");
  parts.eod = eod->second;
}

void load_merges(const std::string& merges_file, BpeParts& parts) {
  std::istringstream in = open_or_throw(merges_file, "merges file", "merges_file");
  std::string line;
  for (int line_number = 1; std::getline(in, line); ++line_number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    size_t space = line.find(' ');
    bool two_symbols = space != std::string::npos && space > 0 && space + 1 < line.size() &&
                       line.find(' ', space + 1) == std::string::npos;
    require(two_symbols, "gpt2 tokenizer: " + merges_file + ":" + std::to_string(line_number) +
                             ": expected two symbols separated by one space, found '" + line + "'");
    parts.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
}

BpeParts load(const std::string& vocab_file, const std::string& merges_file) {
  const std::string folder = vocab_file.empty() || merges_file.empty() ? shipped_gpt2_folder() : "";
  const std::string vocab = vocab_file.empty() ? folder + "/vocab.json" : vocab_file;
  const std::string merges = merges_file.empty() ? folder + "/merges.txt" : merges_file;
  BpeParts parts;
  parts.source = "gpt2 tokenizer " + vocab + " + " + merges;
  load_vocab(vocab, parts);
  load_merges(merges, parts);
  return parts;
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_file, const std::string& merges_file)
    : BpeTokenizer(load(vocab_file, merges_file)) {}

std::string shipped_gpt2_folder() { return (share_dir() / "data" / "gpt2").string(); }

}  // namespace mh::data

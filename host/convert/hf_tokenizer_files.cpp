#include "convert/hf_tokenizer_files.hpp"

#include <megahost/error.hpp>

#include <fstream>
#include <sstream>

#include "data/byte_level_bpe.hpp"
#include "data/byte_tokenizer.hpp"
#include "data/gpt2_tokenizer.hpp"
#include "data/sentencepiece_tokenizer.hpp"
#include "data/tokenizer.hpp"

namespace mh::convert {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

std::string read_text(const std::string& path, const char* key) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), std::string("the checkpoint's tokenizer.") + key + " " + path +
                         " cannot be read; put the file back where the model was trained with it",
          MH_NOT_FOUND);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string file(const json& tokenizer, const char* key) { return tokenizer.value(key, std::string()); }

data::TokenizerFiles files_of(const json& tokenizer) {
  return {file(tokenizer, "vocab_file"), file(tokenizer, "merges_file"), file(tokenizer, "tokenizer_file")};
}

// The text of a special id for tokenizer_config.json; a list (several eos
// ids) names its first. SentencePiece decodes control pieces (<s>, </s>) as
// nothing, so its pieces are named as the model lists them.
std::string token_text(const data::Tokenizer& t, const json& id) {
  const json& one = id.is_array() ? id.front() : id;
  const int32_t v = one.get<int32_t>();
  if (v < 0 || v >= t.vocab_size()) return "";
  if (const auto* sp = dynamic_cast<const data::SentencePieceTokenizer*>(&t)) return sp->piece(v);
  return t.decode(std::span<const int32_t>(&v, 1));
}

ordered tokenizer_config(const std::string& cls, const data::Tokenizer& t, const json& special,
                         const ckpt::ModelShape& model) {
  ordered c;
  c["tokenizer_class"] = cls;
  for (const auto& [key, token] : {std::pair{"bos_token_id", "bos_token"}, std::pair{"eos_token_id", "eos_token"}})
    if (special.contains(key)) c[token] = token_text(t, special[key]);
  c["model_max_length"] = model.positions();
  c["clean_up_tokenization_spaces"] = false;
  // The model takes no token types; generate() refuses inputs it does not use.
  c["model_input_names"] = {"input_ids", "attention_mask"};
  if (cls == "GPT2Tokenizer") {
    c["unk_token"] = c.value("eos_token", std::string());
    c["add_prefix_space"] = false;
  }
  if (const auto* sp = dynamic_cast<const data::SentencePieceTokenizer*>(&t)) {
    if (sp->unk_id() >= 0) c["unk_token"] = sp->piece(sp->unk_id());
    if (sp->pad_id() >= 0) c["pad_token"] = sp->piece(sp->pad_id());
    // Megahost's encode adds neither; a Llama tokenizer would add <s>.
    c["add_bos_token"] = false;
    c["add_eos_token"] = false;
  }
  return c;
}

}  // namespace

std::string byte_tokenizer_json() {
  ordered vocab = ordered::object();
  for (int b = 0; b < 256; ++b) vocab[data::byte_symbols()[size_t(b)]] = b;
  const ordered byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                              {"use_regex", false}};
  ordered j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = ordered::array({{{"id", data::ByteTokenizer::kEod},
                                       {"content", "<|endoftext|>"},
                                       {"single_word", false},
                                       {"lstrip", false},
                                       {"rstrip", false},
                                       {"normalized", false},
                                       {"special", true}}});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level;
  j["post_processor"] = nullptr;
  j["decoder"] = byte_level;
  j["model"] = {{"type", "BPE"},          {"dropout", nullptr},         {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                {"byte_fallback", false}, {"ignore_merges", false},     {"vocab", vocab},
                {"merges", ordered::array()}};
  return j.dump(2) + "\n";
}

json special_ids(const json& tokenizer) {
  json out = json::object();
  if (!tokenizer.is_object() || !tokenizer.contains("name")) return out;
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (tokenizer.contains(key) && !tokenizer[key].is_null()) out[key] = tokenizer[key];
  if (out.size() == 2) return out;
  const int32_t eod = data::make_tokenizer(tokenizer["name"].get<std::string>(), files_of(tokenizer))->eod_id();
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (!out.contains(key)) out[key] = eod;
  return out;
}

std::vector<FolderFile> tokenizer_files(const json& tokenizer, const ckpt::ModelShape& model) {
  if (!tokenizer.is_object() || !tokenizer.contains("name")) return {};
  const std::string name = tokenizer["name"].get<std::string>();
  const data::TokenizerFiles files = files_of(tokenizer);
  const auto t = data::make_tokenizer(name, files);
  const json special = special_ids(tokenizer);
  std::vector<FolderFile> out;
  std::string cls = "PreTrainedTokenizerFast";
  if (name == "byte") {
    out.emplace_back("tokenizer.json", byte_tokenizer_json());
  } else if (name == "gpt2") {
    cls = "GPT2Tokenizer";
    const std::string shipped = data::shipped_gpt2_folder();
    out.emplace_back("vocab.json", read_text(files.vocab_file.empty() ? shipped + "/vocab.json" : files.vocab_file,
                                             "vocab_file"));
    out.emplace_back("merges.txt", read_text(files.merges_file.empty() ? shipped + "/merges.txt" : files.merges_file,
                                             "merges_file"));
  } else if (name == "sentencepiece") {
    cls = "LlamaTokenizer";
    out.emplace_back("tokenizer.model", read_text(files.tokenizer_file, "tokenizer_file"));
  } else {
    out.emplace_back("tokenizer.json", read_text(files.tokenizer_file, "tokenizer_file"));
  }
  out.emplace_back("tokenizer_config.json", tokenizer_config(cls, *t, special, model).dump(2) + "\n");
  ordered generation;
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (special.contains(key)) generation[key] = special[key];
  out.emplace_back("generation_config.json", generation.dump(2) + "\n");
  return out;
}

}  // namespace mh::convert

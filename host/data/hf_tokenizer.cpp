#include "data/hf_tokenizer.hpp"

#include <megahost/error.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "data/regular_file.hpp"

namespace mh::data {
namespace {

using nlohmann::json;

constexpr const char* kEndOfDocument[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"};

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(MH_INVALID_ARGUMENT, "tokenizer file " + path_ + ": " + key + ": " + what);
  }
  // The value at key of object, of the given kind, or fail naming both.
  const json& get(const json& object, const std::string& key, json::value_t kind) const {
    auto it = object.find(key.substr(key.rfind('.') + 1));
    if (it == object.end() || it->type() != kind) {
      fail(key, std::string("missing or not of type ") + json(kind).type_name());
    }
    return *it;
  }
  // Fails unless object[key] is absent, null, false or empty: a feature
  // megahost does not apply and that would change the ids.
  void require_unset(const json& object, const std::string& key, const std::string& why) const {
    auto it = object.find(key.substr(key.rfind('.') + 1));
    if (it == object.end() || it->is_null() || *it == false || *it == "") return;
    fail(key, it->dump() + " is not supported (" + why + ")");
  }

 private:
  std::string path_;
};

void read_vocab(const Reader& r, const json& model, BpeParts& parts) {
  const json& vocab = r.get(model, "model.vocab", json::value_t::object);
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [symbol, id_json] : vocab.items()) {
    int64_t id = id_json.is_number_integer() ? id_json.get<int64_t>() : -1;
    if (id < 0 || id >= static_cast<int64_t>(vocab.size()) || seen[id]) {
      r.fail("model.vocab", "the id of '" + symbol + "' is " + id_json.dump() + "; ids must be 0.." +
                                std::to_string(vocab.size() - 1) + ", each used once");
    }
    seen[id] = true;
    parts.vocab.emplace(symbol, static_cast<int32_t>(id));
  }
}

// Merges are "a b" strings (tokenizers before 0.20) or ["a", "b"] pairs.
void read_merges(const Reader& r, const json& model, BpeParts& parts) {
  const json& merges = r.get(model, "model.merges", json::value_t::array);
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      parts.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    const std::string text = m.is_string() ? m.get<std::string>() : "";
    const size_t space = text.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == text.size() ||
        text.find(' ', space + 1) != std::string::npos) {
      r.fail(key, m.dump() + " is not two symbols (\"a b\" or [\"a\", \"b\"])");
    }
    parts.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
  }
}

void read_model(const Reader& r, const json& root, BpeParts& parts) {
  const json& model = r.get(root, "model", json::value_t::object);
  const json& type = r.get(model, "model.type", json::value_t::string);
  if (type != "BPE") {
    r.fail("model.type", type.dump() + " is not supported; megahost reads BPE models (byte-level, or SentencePiece's "
                                       "with byte_fallback; a tokenizer.model runs as data.tokenizer = \"sentencepiece\")");
  }
  r.require_unset(model, "model.dropout", "BPE dropout is for training-time sampling");
  r.require_unset(model, "model.continuing_subword_prefix", "not a byte-level or SentencePiece BPE");
  r.require_unset(model, "model.end_of_word_suffix", "not a byte-level or SentencePiece BPE");
  auto flag = [&](const char* key) {
    auto it = model.find(key);
    return it != model.end() && it->is_boolean() && it->get<bool>();
  };
  parts.ignore_merges = flag("ignore_merges");
  read_vocab(r, model, parts);
  read_merges(r, model, parts);
  // byte_fallback marks SentencePiece's layout: merges over characters.
  // (A byte-level model's unk_token is never used: every byte has a symbol.)
  if (!flag("byte_fallback")) return;
  parts.metaspace.emplace();
  auto unk = model.find("unk_token");
  if (unk == model.end() || unk->is_null()) return;
  if (!unk->is_string() || !parts.vocab.contains(unk->get<std::string>())) {
    r.fail("model.unk_token", unk->dump() + " is not in model.vocab");
  }
  if (!flag("fuse_unk")) r.fail("model.fuse_unk", "false is not supported; megahost fuses unknown characters, as Llama's files do");
  parts.metaspace->unk = parts.vocab.at(unk->get<std::string>());
}

// SentencePiece's "▁" in a tokenizer.json: the Llama 2 normalizer
// (Prepend "▁" then Replace " " by "▁", or the Replace alone) without a
// pre-tokenizer, or no normalizer and a Metaspace pre-tokenizer.
void read_metaspace(const Reader& r, const json& root, Metaspace& m) {
  const json none;
  const json& normalizer = root.contains("normalizer") ? root["normalizer"] : none;
  const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : none;
  const std::string meta = "\u2581";
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", meta}};
  const json prepend = {{"type", "Prepend"}, {"prepend", meta}};
  if (!normalizer.is_null()) {
    const json steps = normalizer.value("type", "") == "Sequence" ? normalizer.value("normalizers", json()) : json();
    const bool with_prepend = steps == json::array({prepend, replace});
    if (!with_prepend && steps != json::array({replace}) && normalizer != replace) {
      r.fail("normalizer", normalizer.dump() + " is not supported; expected Llama 2's Sequence of Prepend(\"▁\") and "
                           "Replace(\" \", \"▁\"), or no normalizer and a Metaspace pre-tokenizer");
    }
    r.require_unset(root, "pre_tokenizer", "after Llama 2's normalizer the text is one piece");
    m.prepend = with_prepend ? Metaspace::Prepend::kEverySegment : Metaspace::Prepend::kNever;
    return;
  }
  if (!pre.is_object() || pre.value("type", "") != "Metaspace" || pre.value("replacement", "") != meta) {
    r.fail("pre_tokenizer", pre.dump() + " is not supported with byte_fallback; expected Metaspace with replacement "
                            "\"▁\" (or Llama 2's normalizer and no pre-tokenizer)");
  }
  const std::string scheme = pre.value("prepend_scheme", "always");
  if (scheme == "first") {
    m.prepend = Metaspace::Prepend::kFirst;
  } else if (scheme == "always") {
    m.prepend = Metaspace::Prepend::kAlways;
  } else if (scheme == "never") {
    m.prepend = Metaspace::Prepend::kNever;
  } else {
    r.fail("pre_tokenizer.prepend_scheme", "\"" + scheme + "\" is not one of first, always, never");
  }
  m.split = pre.value("split", true);
}

// Llama 2's decoder: Replace("▁", " "), ByteFallback, Fuse, then Strip of
// one leading space where the encoder puts a "▁" first.
void read_metaspace_decoder(const Reader& r, const json& root, Metaspace& m) {
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
  json expected = json::array({replace, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
  const json strip = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}};
  const json decoder = root.value("decoder", json());
  const json steps = decoder.is_object() && decoder.value("type", "") == "Sequence" ? decoder.value("decoders", json())
                                                                                    : json();
  m.strip_space = steps.is_array() && steps.size() == 4 && steps[3] == strip;
  if (m.strip_space) expected.push_back(strip);
  if (steps != expected) {
    r.fail("decoder", decoder.dump() + " is not supported with byte_fallback; expected a Sequence of Replace(\"▁\", "
                      "\" \"), ByteFallback, Fuse and optionally Strip(\" \", 1, 0), as Llama 2's");
  }
}

// ByteLevel alone (GPT-2's pattern when use_regex), or Split(regex,
// Isolated) then ByteLevel without a regex (Llama 3).
void read_pre_tokenizer(const Reader& r, const json& root, BpeParts& parts) {
  const json& pre = r.get(root, "pre_tokenizer", json::value_t::object);
  const json& type = r.get(pre, "pre_tokenizer.type", json::value_t::string);
  auto byte_level = [&](const json& p, const std::string& key, bool own_regex) {
    if (p.value("type", "") != "ByteLevel") {
      r.fail(key + ".type", p.value("type", "null") + " is not supported here; expected ByteLevel");
    }
    parts.add_prefix_space = p.value("add_prefix_space", false);
    if (p.value("use_regex", true) != own_regex) {
      r.fail(key + ".use_regex", own_regex ? "false leaves the text uncut; megahost needs a pattern"
                                           : "true after a Split would cut the text twice");
    }
  };
  if (type == "ByteLevel") return byte_level(pre, "pre_tokenizer", true);
  const json& steps = type == "Sequence" ? r.get(pre, "pre_tokenizer.pretokenizers", json::value_t::array) : json();
  if (type != "Sequence" || steps.size() != 2) {
    r.fail("pre_tokenizer", "only ByteLevel, or a Sequence of Split and ByteLevel, is supported");
  }
  const json& split = steps[0];
  if (split.value("type", "") != "Split" || split.value("behavior", "") != "Isolated" ||
      split.value("invert", false) || !split.contains("pattern") || !split["pattern"].contains("Regex")) {
    r.fail("pre_tokenizer.pretokenizers[0]",
           "expected a Split by a Regex with behavior Isolated, found " + split.dump());
  }
  parts.pattern = split["pattern"]["Regex"].get<std::string>();
  byte_level(steps[1], "pre_tokenizer.pretokenizers[1]", false);
}

void read_added_tokens(const Reader& r, const json& root, BpeParts& parts) {
  auto added = root.find("added_tokens");
  if (added == root.end() || added->is_null()) return;
  if (!added->is_array()) r.fail("added_tokens", "not an array");
  for (size_t i = 0; i < added->size(); ++i) {
    const json& token = (*added)[i];
    const std::string key = "added_tokens[" + std::to_string(i) + "]";
    // Added tokens extend the vocabulary at most by their number (Llama 3's
    // follow its 128,000 ids), so a vocabulary never has holes to embed.
    const size_t limit = parts.vocab.size() + added->size();
    if (!token.is_object() || !token.contains("id") || !token["id"].is_number_integer() || token["id"] < 0 ||
        token["id"] >= limit || !token.contains("content") || !token["content"].is_string()) {
      r.fail(key, "expected {\"id\": 0.." + std::to_string(limit - 1) + ", \"content\": string}, found " +
                      token.dump());
    }
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      r.require_unset(token, key + "." + flag, "added tokens are matched exactly");
    }
    // They are cut from the text before the normalizer, so one it would
    // change first cannot be matched as `tokenizers` matches it.
    if (root.contains("normalizer") && !root["normalizer"].is_null()) {
      r.require_unset(token, key + ".normalized", "added tokens are matched in the text as it is, before the normalizer");
    }
    parts.special_tokens.emplace_back(token["content"].get<std::string>(), token["id"].get<int32_t>());
  }
}

void choose_eod(const Reader& r, BpeParts& parts) {
  for (const char* name : kEndOfDocument) {
    for (const auto& [content, id] : parts.special_tokens) {
      if (content == name) return void(parts.eod = id);
    }
    if (auto it = parts.vocab.find(name); it != parts.vocab.end()) return void(parts.eod = it->second);
  }
  r.fail("added_tokens", "none of <|endoftext|>, <|end_of_text|>, </s>, <eos> is there to end a document; add one");
}

BpeParts parse(const std::string& path, std::string_view json_text);

}  // namespace

BpeParts parse_tokenizer_json(const std::string& path, std::string_view json_text) {
  try {
    return parse(path, json_text);
  } catch (const nlohmann::json::exception& e) {
    // A value of an unexpected type deep in the file.
    throw Error(MH_INVALID_ARGUMENT, "tokenizer file " + path + ": " + e.what());
  }
}

namespace {
BpeParts parse(const std::string& path, std::string_view json_text) {
  Reader r(path);
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) r.fail("(file)", "not a JSON object; is it a Hugging Face tokenizer.json?");
  BpeParts parts;
  parts.source = path;
  read_model(r, root, parts);
  if (parts.metaspace) {
    read_metaspace(r, root, *parts.metaspace);
    read_metaspace_decoder(r, root, *parts.metaspace);
  } else {
    r.require_unset(root, "normalizer", "normalizers are not applied; byte-level BPE models have none");
    read_pre_tokenizer(r, root, parts);
  }
  read_added_tokens(r, root, parts);
  choose_eod(r, parts);
  return parts;
}

BpeParts load(const std::string& path) {
  return parse_tokenizer_json(path, read_regular_file(path, "the tokenizer file is a tokenizer.json; pass its path "
                                                          "with --tokenizer_file or data.tokenizer_file"));
}
}  // namespace

HfTokenizer::HfTokenizer(const std::string& tokenizer_file) : BpeTokenizer(load(tokenizer_file)) {}

}  // namespace mh::data

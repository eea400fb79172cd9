// The tokenizer files of an exported Hugging Face folder, so that
// transformers' AutoTokenizer and generate() need nothing beside it:
// tokenizer.json (the byte tokenizer written as a byte-level BPE without
// merges; a huggingface tokenizer's own file), GPT-2's vocab.json and
// merges.txt, or a sentencepiece tokenizer's tokenizer.model (as
// LlamaTokenizer, which transformers converts on loading);
// tokenizer_config.json; generation_config.json.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/metadata.hpp"

namespace mh::convert {

// A file of the folder: its name and its text.
using FolderFile = std::pair<std::string, std::string>;

// The special ids a checkpoint's tokenizer record carries ("bos_token_id",
// "eos_token_id"), or, for a checkpoint that predates them, its
// tokenizer's end-of-document id; an empty object without a tokenizer name.
nlohmann::json special_ids(const nlohmann::json& tokenizer);

// The tokenizer and generation files for a checkpoint's model and its
// tokenizer record; none without a tokenizer name (a checkpoint that
// predates it). Throws naming the file for a tokenizer file that is gone.
std::vector<FolderFile> tokenizer_files(const nlohmann::json& tokenizer, const ckpt::ModelShape& model);

// The byte tokenizer (ids 0..255 the bytes, 256 the end of document) as a
// Hugging Face tokenizer.json.
std::string byte_tokenizer_json();

}  // namespace mh::convert

// The fuzz targets: each feeds one input to the host code that reads it from
// a user or a plugin, and fails (crashes) only on a host bug. A refusal with
// mh::Error or a Diagnostics report is the expected answer to bad input;
// anything else escaping (another exception type, a sanitizer report, a
// hang) is a finding. libFuzzer drives them (fuzz_main.cpp, -DMEGAHOST_FUZZ=ON)
// and fuzz_replay runs committed inputs through them in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace mh::fuzz {

using Input = std::span<const uint8_t>;

// The bytes as a run's TOML file: Config::load, then assemble against
// fixed_registry().
void config(Input input);
// One command-line override (`section.key=value`) per line, applied to the
// embedded default config, then assemble.
void overrides(Input input);
// vocab.json NUL merges.txt NUL text: loads the GPT-2 tokenizer from the two
// files, encodes the text and decodes every id of the vocabulary.
void gpt2_tokenizer(Input input);
// tokenizer.json NUL text: parses a Hugging Face tokenizer.json, encodes the
// text and decodes every id of the vocabulary.
void tokenizer_json(Input input);
void sentencepiece_model(Input input);
// seq_len byte, u32 little-endian length of .idx, the .idx bytes, then the
// .bin bytes: opens the indexed dataset, reads every sequence and the first
// training samples.
void indexed_dataset(Input input);
// A plugin descriptor built field by field from the bytes (see
// plugin_descriptor.cpp); the host validates it and, when it is accepted,
// registers, lists and assembles its components as it would a loaded plugin.
void plugin_descriptor(Input input);

// A checkpoint's metadata.json: parsed and checked, then written and read again.
void checkpoint_metadata(Input input);
// Slices of one tensor, 4 bytes each of shape and 8 x 4 bytes per slice
// (offset and shape, small values so they often touch): the exact-cover
// check against a brute-force count of every element.
void slice_cover(Input input);
// A safetensors file: its header parsed and checked against the file's size.
void safetensors_header(Input input);
// A checkpoint's rank file under a fixed index with its true size and hash,
// loaded in one pass: what loads equals what the random-access reader reads.
void checkpoint_rank_file(Input input);

// A Hugging Face config.json: parsed as the model it describes, and what is
// accepted written and read back.
void hf_config(Input input);
// A model.safetensors.index.json: its weight_map of shard file names.
void shard_index(Input input);

// A dataset's PREFIX.range sidecar beside a fixed dataset ($BIN and $HASH
// in the input stand for its true stamp): read, believed or rescanned.
void token_range_sidecar(Input input);
// A checkpoint folder's megahost_run.json: the run identity read from it.
void checkpoint_owner(Input input);

// A .jsonl prompts file of a [generate] section.
void prompts_jsonl(Input input);

// One line of a --format=sft .jsonl file (prompt/completion, input/output or
// chat messages), read into trained and untrained segments with a ChatML
// template and without one.
void sft_jsonl(Input input);
// A chat template: parsed, then rendered over a fixed conversation.
void chat_template(Input input);
// An HTTP request body read as a completion and as a chat request.
void openai_request(Input input);

// The target called `name` ("config", ...), or nullptr.
using Target = void (*)(Input);
Target find_target(std::string_view name);

}  // namespace mh::fuzz

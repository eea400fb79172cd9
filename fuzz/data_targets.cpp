// Data-file fuzzing: the GPT-2 tokenizer's vocab.json and merges.txt, the
// Hugging Face tokenizer.json, the SentencePiece tokenizer.model, and the
// Megatron indexed dataset (.idx/.bin) with the samples drawn from it.
#include <megahost/error.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "data/byte_tokenizer.hpp"
#include "data/gpt2_tokenizer.hpp"
#include "data/gpt_samples.hpp"
#include "data/hf_tokenizer.hpp"
#include "data/indexed_dataset.hpp"
#include "data/sentencepiece_tokenizer.hpp"
#include "data/sft_input.hpp"
#include "scratch.hpp"
#include "targets.hpp"

namespace mh::fuzz {
namespace {

// The next NUL-terminated part of `text`, which is consumed.
std::string_view next_part(std::string_view& text) {
  size_t end = std::min(text.find('\0'), text.size());
  std::string_view part = text.substr(0, end);
  text.remove_prefix(std::min(end + 1, text.size()));
  return part;
}

void use_tokenizer(const data::Tokenizer& tokenizer, std::string_view text) {
  tokenizer.decode(tokenizer.encode(text));
  std::vector<int32_t> every_id(size_t(tokenizer.vocab_size()));
  std::iota(every_id.begin(), every_id.end(), 0);
  tokenizer.decode(every_id);
}

void read_everything(const data::IndexedDataset& dataset, int64_t seq_len) {
  std::vector<int32_t> tokens;
  for (int64_t s = 0; s < dataset.sequence_count(); ++s) {
    tokens.resize(size_t(dataset.sequence_length(s)));
    dataset.read(s, 0, int64_t(tokens.size()), tokens.data());
  }
  data::GptSamples samples(dataset, data::Split::kTrain, "98,2,0", seq_len, 1234);
  tokens.resize(size_t(seq_len + 1));
  for (int64_t i = 0; i < std::min<int64_t>(samples.size() + 1, 8); ++i) samples.get(i, tokens.data());
}

}  // namespace

void gpt2_tokenizer(Input input) {
  std::string_view rest = as_text(input);
  std::string vocab = scratch_file("vocab.json", next_part(rest));
  std::string merges = scratch_file("merges.txt", next_part(rest));
  try {
    use_tokenizer(data::Gpt2Tokenizer(vocab, merges), rest);
  } catch (const Error&) {
  }
}

void tokenizer_json(Input input) {
  std::string_view rest = as_text(input);
  std::string_view json_text = next_part(rest);
  try {
    use_tokenizer(data::BpeTokenizer(data::parse_tokenizer_json("tokenizer.json", json_text)), rest);
  } catch (const Error&) {
  }
}

// The input is the model's bytes (a serialized protobuf may hold any byte,
// so the text is fixed): every script, spaces, bytes for the fallback.
void sentencepiece_model(Input input) {
  try {
    data::SentencePieceTokenizer tokenizer("tokenizer.model", as_text(input));
    use_tokenizer(tokenizer, "  Hello\tworld\n\u4e2d\u6587 \U0001F600 \u2581x <s></s><unk> \xC3\xA9\x00!");
  } catch (const Error&) {
  }
}

void indexed_dataset(Input input) {
  if (input.size() < 5) return;
  const int64_t seq_len = 1 + input[0] % 32;
  uint32_t idx_bytes = 0;
  std::memcpy(&idx_bytes, input.data() + 1, sizeof idx_bytes);
  std::string_view rest = as_text(input.subspan(5));
  idx_bytes = std::min<uint32_t>(idx_bytes, uint32_t(rest.size()));
  scratch_file("dataset.idx", rest.substr(0, idx_bytes));
  std::string bin = scratch_file("dataset.bin", rest.substr(idx_bytes));
  try {
    read_everything(data::IndexedDataset(bin.substr(0, bin.size() - 4)), seq_len);
  } catch (const Error&) {
  }
}

void sft_jsonl(Input input) {
  static const data::ChatTemplate chat(
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
      "", "");
  const std::string_view line(reinterpret_cast<const char*>(input.data()), input.size());
  for (const data::ChatTemplate* template_ : {&chat, static_cast<const data::ChatTemplate*>(nullptr)}) {
    try {
      const std::vector<data::SftSegment> segments = data::read_sft_line(line, template_);
      // Byte tokens are the text's bytes: the mask is each byte's segment.
      std::vector<int32_t> mask;
      for (const data::SftSegment& segment : segments) {
        if (segment.text.empty()) __builtin_trap();  // empty segments are left out
        mask.insert(mask.end(), segment.text.size(), segment.trained ? 1 : 0);
      }
      if (data::tokenize_segments(segments, data::ByteTokenizer()).mask != mask) __builtin_trap();
    } catch (const Error&) {
    }
  }
}

}  // namespace mh::fuzz

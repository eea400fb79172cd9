// megahost_prepare: tokenizes a text corpus into a Megatron indexed dataset
// (PREFIX.bin + PREFIX.idx) that the training engine reads. See docs/data.md.
#include "data/indexed_dataset.hpp"
#include "data/text_input.hpp"
#include "data/tokenizer.hpp"

#include <gflags/gflags.h>
#include <megahost/error.hpp>

#include <iostream>

DEFINE_string(input, "",
              "text to tokenize: file.txt (documents separated by blank lines) or file.jsonl "
              "(one JSON object per line)");
DEFINE_string(json_key, "text", "key of the document text in each .jsonl object");
DEFINE_string(tokenizer, "byte",
              "byte (bytes as tokens, vocab 257), gpt2 (GPT-2's byte-level BPE) or huggingface "
              "(a byte-level BPE tokenizer.json)");
DEFINE_string(vocab_file, "", "vocab.json for --tokenizer=gpt2; empty: GPT-2's own, shipped");
DEFINE_string(merges_file, "", "merges.txt for --tokenizer=gpt2; empty: GPT-2's own, shipped");
DEFINE_string(tokenizer_file, "", "Hugging Face tokenizer.json, for --tokenizer=huggingface");
DEFINE_string(output_prefix, "", "writes OUTPUT_PREFIX.bin and OUTPUT_PREFIX.idx");
DEFINE_bool(append_eod, true, "end every document with the tokenizer's end-of-document token");

namespace {

void prepare() {
  mh::require(!FLAGS_input.empty(), "--input is required (a .txt or .jsonl file)");
  mh::require(!FLAGS_output_prefix.empty(), "--output_prefix is required");
  auto tokenizer = mh::data::make_tokenizer(
      FLAGS_tokenizer, {FLAGS_vocab_file, FLAGS_merges_file, FLAGS_tokenizer_file});
  const mh::data::TokenDType dtype = mh::data::dtype_for_vocab(tokenizer->vocab_size());
  mh::data::IndexedDatasetWriter writer(FLAGS_output_prefix, dtype);
  mh::data::for_each_document(FLAGS_input, FLAGS_json_key, [&](std::string_view text) {
    std::vector<int32_t> ids = tokenizer->encode(text);
    if (FLAGS_append_eod) ids.push_back(tokenizer->eod_id());
    writer.add_document(ids);
  });
  writer.finish();
  std::cout << "megahost_prepare: wrote " << writer.document_count() << " documents, "
            << writer.token_count() << " tokens (" << FLAGS_tokenizer << " tokenizer, vocab "
            << tokenizer->vocab_size() << ", " << mh::data::dtype_name(dtype) << ") to "
            << FLAGS_output_prefix << ".bin and .idx\n";
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "tokenizes text into a Megatron indexed dataset\n"
      "  megahost_prepare --input=corpus.txt --tokenizer=byte --output_prefix=data/corpus_byte");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    prepare();
  } catch (const std::exception& e) {
    std::cerr << "megahost_prepare: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

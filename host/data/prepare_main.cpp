// megahost_prepare: tokenizes a text corpus into Megatron indexed datasets
// (PREFIX.bin + PREFIX.idx) that the training engine reads. See docs/data.md.
#include "data/chat_template.hpp"
#include "data/indexed_dataset.hpp"
#include "data/prepare.hpp"
#include "data/tokenizer.hpp"
#include "run/stop_signals.hpp"

#include <gflags/gflags.h>
#include <megahost/error.hpp>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <iostream>
#include <new>
#include <sstream>

DEFINE_string(input, "",
              "text to tokenize: file.txt (documents separated by blank lines) or file.jsonl "
              "(one JSON object per line)");
DEFINE_string(json_keys, "text",
              "keys of the document texts in each .jsonl object, separated by commas; with several "
              "keys each gets its own dataset, OUTPUT_PREFIX_<key>");
DEFINE_string(json_key, "", "one key, as --json_keys (kept for older command lines)");
DEFINE_string(tokenizer, "byte",
              "byte (bytes as tokens, vocab 257), gpt2 (GPT-2's byte-level BPE), huggingface "
              "(a BPE tokenizer.json) or sentencepiece (a tokenizer.model)");
DEFINE_string(vocab_file, "", "vocab.json for --tokenizer=gpt2; empty: GPT-2's own, shipped");
DEFINE_string(merges_file, "", "merges.txt for --tokenizer=gpt2; empty: GPT-2's own, shipped");
DEFINE_string(tokenizer_file, "",
              "tokenizer.json for --tokenizer=huggingface, tokenizer.model for --tokenizer=sentencepiece");
DEFINE_string(output_prefix, "", "writes OUTPUT_PREFIX.bin and OUTPUT_PREFIX.idx");
DEFINE_bool(append_eod, true, "end every document with the tokenizer's end-of-document token");
DEFINE_int32(workers, 1, "threads that parse and tokenize; the output is the same for any number");
DEFINE_string(format, "text",
              "text (documents under --json_keys) or sft (.jsonl lines of prompt/completion, input/output or "
              "chat messages; writes OUTPUT_PREFIX_loss_mask beside the tokens)");
DEFINE_string(chat_template, "",
              "for --format=sft's messages: a tokenizer_config.json (or Jinja file) with the chat template; "
              "empty: the tokenizer_config.json beside --tokenizer_file, when there is one");
DEFINE_bool(skip_bad_documents, false,
            "skip documents that cannot be read or tokenized (invalid UTF-8, malformed JSON, a "
            "missing key) and count them, instead of stopping at the first");

namespace {

std::vector<std::string> json_keys() {
  const std::string keys = FLAGS_json_key.empty() ? FLAGS_json_keys : FLAGS_json_key;
  std::vector<std::string> out;
  std::stringstream in(keys);
  for (std::string key; std::getline(in, key, ',');)
    if (!key.empty()) out.push_back(key);
  return out;
}

std::string rate(const mh::data::PrepareReport& r) {
  char line[160];
  std::snprintf(line, sizeof line, "%lld documents, %lld tokens, %.1f MB read in %.1f s (%.1f MB/s)",
                static_cast<long long>(r.documents), static_cast<long long>(r.tokens), r.bytes_read / 1e6,
                r.seconds, r.seconds > 0 ? r.bytes_read / 1e6 / r.seconds : 0.0);
  return line;
}

// --chat_template, else a tokenizer_config.json with a chat template beside
// --tokenizer_file (as the server finds it); none: messages are refused.
std::optional<mh::data::ChatTemplate> chat_template() {
  std::string file = FLAGS_chat_template;
  if (file.empty() && !FLAGS_tokenizer_file.empty()) {
    const auto beside = std::filesystem::path(FLAGS_tokenizer_file).parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(beside)) file = beside.string();
  }
  if (file.empty()) return std::nullopt;
  try {
    return mh::data::ChatTemplate::from_file(file);
  } catch (const mh::data::ChatTemplateError& e) {
    throw mh::Error(MH_INVALID_ARGUMENT, "--chat_template " + file + ": " + e.what() +
                                             "; fix it or give --chat_template another file");
  }
}

void prepare() {
  mh::require(!FLAGS_input.empty(), "--input is required (a .txt or .jsonl file)");
  mh::require(!FLAGS_output_prefix.empty(), "--output_prefix is required");
  auto tokenizer = mh::data::make_tokenizer(
      FLAGS_tokenizer, {FLAGS_vocab_file, FLAGS_merges_file, FLAGS_tokenizer_file});
  mh::require(FLAGS_format == "text" || FLAGS_format == "sft",
              "--format " + FLAGS_format + ": give text (documents) or sft (prompt/completion or chat lines)");
  const bool sft = FLAGS_format == "sft";
  const std::optional<mh::data::ChatTemplate> chat = sft ? chat_template() : std::nullopt;
  mh::data::PrepareOptions options{FLAGS_input,      json_keys(),   FLAGS_output_prefix,
                                   FLAGS_append_eod, FLAGS_workers, FLAGS_skip_bad_documents,
                                   sft,              chat ? &*chat : nullptr};
  // On a terminal the progress line redraws itself; in a log it is one line a second.
  const char end = ::isatty(STDERR_FILENO) ? '\r' : '\n';
  mh::data::PrepareReport report = mh::data::prepare(
      options, *tokenizer, [end](const auto& r) { std::cerr << "megahost_prepare: " << rate(r) << end << std::flush; });
  if (end == '\r') std::cerr << "\n";
  const auto dtype = mh::data::dtype_for_vocab(tokenizer->vocab_size());
  std::cout << "megahost_prepare: wrote " << rate(report) << " (" << FLAGS_tokenizer << " tokenizer, vocab "
            << tokenizer->vocab_size() << ", " << mh::data::dtype_name(dtype) << ", " << FLAGS_workers
            << " worker(s)) to " << FLAGS_output_prefix << (!sft && options.json_keys.size() > 1 ? "_<key>" : "")
            << ".bin and .idx\n";
  if (sft)
    std::cout << "megahost_prepare: " << report.trained << " of the tokens are trained on; their loss mask is "
              << FLAGS_output_prefix << "_loss_mask.bin and .idx\n";
  if (report.skipped > 0) {
    std::cout << "megahost_prepare: skipped " << report.skipped << " bad document(s); the first: "
              << report.first_skipped << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "tokenizes text into a Megatron indexed dataset\n"
      "  megahost_prepare --input=corpus.txt --tokenizer=byte --output_prefix=data/corpus_byte");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const mh::StopSignals signals;
  try {
    prepare();
  } catch (const mh::Interrupted& e) {
    std::cerr << "megahost_prepare: " << e.what() << "\n";
    return mh::interrupted_status(e.signal());
  } catch (const std::bad_alloc&) {
    std::cerr << "megahost_prepare: out of memory (std::bad_alloc); give fewer --workers or more memory; nothing "
                 "was written ("
              << FLAGS_output_prefix << " is as it was)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "megahost_prepare: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

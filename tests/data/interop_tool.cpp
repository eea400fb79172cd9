// The C++ side of the Python interoperability checks, JSON in and out:
//   encode gpt2 [VOCAB MERGES] | encode huggingface TOKENIZER_JSON | encode sentencepiece TOKENIZER_MODEL
//                         stdin: ["text", ...]  stdout: {"ids": [[...]], "decoded": ["...", ...],
//                         "seconds": time spent encoding, "tokens": ids in all}
//   decode NAME FILE      stdin: [[id, ...], ...]  stdout: {"decoded": ["...", ...]}, with the
//                         tokenizer NAME (huggingface or sentencepiece) loaded from FILE
//   pretokenize [PATTERN] stdin: ["text", ...]  stdout: {"pieces": [["piece", ...], ...]}
//                         (GPT-2's pattern by default)
//   samples PATHS SPLIT SEQ_LEN
//                         stdin: [index, ...]  stdout: {"samples": [[token, ...] per index]},
//                         training samples of data.paths = PATHS, data.split = SPLIT
//   read PREFIX           stdout: {"dtype": "uint16", "documents": [[[token, ...] per sequence]]}
//   write PREFIX DTYPE    stdin: [[token, ...] per document], DTYPE uint16 or int32
#include "data/data_sources.hpp"
#include "data/indexed_dataset.hpp"
#include "data/pretokenizer.hpp"
#include "data/tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <string_view>

namespace {

using nlohmann::json;
using namespace mh::data;

json encode(std::string_view name, int argc, char** argv) {
  TokenizerFiles files;
  if (name == "gpt2" && argc == 5) files = {argv[3], argv[4], ""};
  if ((name == "huggingface" || name == "sentencepiece") && argc == 4) files.tokenizer_file = argv[3];
  auto tokenizer = make_tokenizer(name, files);
  std::vector<std::string> texts = json::parse(std::cin).get<std::vector<std::string>>();
  std::vector<std::vector<int32_t>> ids;
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& text : texts) ids.push_back(tokenizer->encode(text));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  json result = {{"ids", ids}, {"decoded", json::array()}, {"seconds", seconds}, {"tokens", 0}};
  for (const auto& one : ids) {
    result["decoded"].push_back(tokenizer->decode(one));
    result["tokens"] = result["tokens"].get<int64_t>() + static_cast<int64_t>(one.size());
  }
  return result;
}

json decode(std::string_view name, const std::string& file) {
  TokenizerFiles files;
  files.tokenizer_file = file;
  auto tokenizer = make_tokenizer(name, files);
  json decoded = json::array();
  for (const json& ids : json::parse(std::cin)) decoded.push_back(tokenizer->decode(ids.get<std::vector<int32_t>>()));
  return {{"decoded", decoded}};
}

json pretokenize(std::string_view pattern) {
  Pretokenizer pretokenizer(pattern);
  json pieces = json::array();
  for (const json& text_json : json::parse(std::cin)) {
    const std::string text = text_json.get<std::string>();  // the pieces are views into it
    json one = json::array();
    for (std::string_view piece : pretokenizer.split(text)) one.push_back(piece);
    pieces.push_back(one);
  }
  return {{"pieces", pieces}};
}

json samples(const std::string& paths, const std::string& split, int64_t seq_len) {
  DataRequest request{{"", paths, "", "", "", split}, [](const std::string& p) { return p; },
                      seq_len, 1234, true, false, false, false, INT32_MAX, "int32"};
  OpenedData data = open_data(request);
  json result = json::array();
  std::vector<int32_t> tokens(static_cast<size_t>(seq_len + 1));
  for (const json& index : json::parse(std::cin)) {
    data.train->get(index.get<int64_t>(), tokens.data());
    result.push_back(tokens);
  }
  return {{"samples", result}};
}

json read(const std::string& prefix) {
  IndexedDataset dataset(prefix);
  json documents = json::array();
  for (int64_t d = 0; d < dataset.document_count(); ++d) {
    json sequences = json::array();
    for (int64_t s = dataset.document_begin(d); s < dataset.document_begin(d + 1); ++s) {
      std::vector<int32_t> tokens(dataset.sequence_length(s));
      dataset.read(s, 0, static_cast<int64_t>(tokens.size()), tokens.data());
      sequences.push_back(tokens);
    }
    documents.push_back(sequences);
  }
  return {{"dtype", dtype_name(dataset.dtype())}, {"documents", documents}};
}

json write(const std::string& prefix, std::string_view dtype) {
  if (dtype != "uint16" && dtype != "int32") throw std::invalid_argument("dtype: uint16 or int32");
  IndexedDatasetWriter writer(prefix, dtype == "uint16" ? TokenDType::kUint16 : TokenDType::kInt32);
  for (const json& document : json::parse(std::cin)) {
    writer.add_document(document.get<std::vector<int32_t>>());
  }
  writer.finish();
  return {{"documents", writer.document_count()}, {"tokens", writer.token_count()}};
}

json run(int argc, char** argv) {
  const std::string_view command = argc > 1 ? argv[1] : "";
  if (command == "encode" && argc >= 3) return encode(argv[2], argc, argv);
  if (command == "decode" && argc == 4) return decode(argv[2], argv[3]);
  if (command == "pretokenize" && argc <= 3) return pretokenize(argc == 3 ? argv[2] : kGpt2Pattern);
  if (command == "read" && argc == 3) return read(argv[2]);
  if (command == "samples" && argc == 5) return samples(argv[2], argv[3], std::stoll(argv[4]));
  if (command == "write" && argc == 4) return write(argv[2], argv[3]);
  throw std::invalid_argument(
      "usage: data_interop_tool encode gpt2 [VOCAB MERGES] | encode huggingface|sentencepiece FILE | "
      "decode huggingface|sentencepiece FILE | "
      "pretokenize [PATTERN] | samples PATHS SPLIT SEQ_LEN | read PREFIX | "
      "write PREFIX uint16|int32");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::cout << run(argc, argv).dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "data_interop_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// The C++ side of the Python interoperability checks, JSON in and out:
//   encode VOCAB MERGES   stdin: ["text", ...]  stdout: {"ids": [[...]], "decoded": ["...", ...]}
//   read PREFIX           stdout: {"dtype": "uint16", "documents": [[[token, ...] per sequence]]}
//   write PREFIX DTYPE    stdin: [[token, ...] per document], DTYPE uint16 or int32
#include "data/gpt2_tokenizer.hpp"
#include "data/indexed_dataset.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <string_view>

namespace {

using nlohmann::json;
using namespace mh::data;

json encode(const std::string& vocab, const std::string& merges) {
  Gpt2Tokenizer tokenizer(vocab, merges);
  json result = {{"ids", json::array()}, {"decoded", json::array()}};
  for (const json& text : json::parse(std::cin)) {
    std::vector<int32_t> ids = tokenizer.encode(text.get<std::string>());
    result["ids"].push_back(ids);
    result["decoded"].push_back(tokenizer.decode(ids));
  }
  return result;
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
  if (command == "encode" && argc == 4) return encode(argv[2], argv[3]);
  if (command == "read" && argc == 3) return read(argv[2]);
  if (command == "write" && argc == 4) return write(argv[2], argv[3]);
  throw std::invalid_argument(
      "usage: data_interop_tool encode VOCAB MERGES | read PREFIX | "
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

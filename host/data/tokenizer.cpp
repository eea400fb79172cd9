#include "data/tokenizer.hpp"

#include "data/byte_tokenizer.hpp"
#include "data/gpt2_tokenizer.hpp"

#include <megahost/error.hpp>

namespace mh::data {

std::unique_ptr<Tokenizer> make_tokenizer(std::string_view name, const std::string& vocab_file,
                                          const std::string& merges_file) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") return std::make_unique<Gpt2Tokenizer>(vocab_file, merges_file);
  throw Error(MH_INVALID_ARGUMENT,
              "unknown tokenizer '" + std::string(name) + "'; choose \"byte\" or \"gpt2\"");
}

}  // namespace mh::data

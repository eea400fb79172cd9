#include "preflight/size_limits.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace mh {
namespace {

// A vocabulary left to the tokenizer (model.vocab = 0) is taken at this
// bound, above that of every shipped tokenizer (GPT-2's 50257).
constexpr int64_t kTokenizerVocabBound = 1 << 16;

struct Product {
  const char* what;
  std::vector<const char*> keys;  // "section.key", each a factor
  int64_t bytes_per_element;      // f32, times the copies kept (params: value, grad, two Adam moments)
};

// The largest sizes the engine forms (docs/engine.md, the memory plan).
const Product kProducts[] = {
    {"the attention scores of one layer", {"train.micro_batch", "model.heads", "model.seq_len", "model.seq_len"}, 4},
    {"one layer's MLP activation", {"train.micro_batch", "model.seq_len", "model.ffn_hidden"}, 4},
    {"the logits", {"train.micro_batch", "model.seq_len", "model.vocab"}, 4},
    {"the activations of all layers", {"model.layers", "train.micro_batch", "model.seq_len", "model.hidden"}, 4 * 34},
    {"the attention weights of all layers", {"model.layers", "model.hidden", "model.hidden"}, 16 * 4},
    // With a head size of its own (0: the line above says it all).
    {"the attention weights of all layers", {"model.layers", "model.hidden", "model.heads", "model.head_dim"}, 16 * 4},
    {"the MLP weights of all layers", {"model.layers", "model.hidden", "model.ffn_hidden"}, 16 * 2},
    {"the embeddings", {"model.vocab", "model.hidden"}, 16},
    {"the position embeddings", {"model.seq_len", "model.hidden"}, 16},
};

int64_t value_of(const Assembly& a, const std::string& key) {
  const std::string section = key.substr(0, key.find('.')), name = key.substr(key.find('.') + 1);
  Options options = section == "train" ? a.train.options() : a.model.options();
  const int64_t v = options.get_int(name);
  if (key == "model.ffn_hidden" && v == 0) return 4 * options.get_int("hidden");
  if (key == "model.vocab" && v == 0) return kTokenizerVocabBound;
  return v;
}

// "model.heads = 100000, model.seq_len = 10000000" (each key once).
std::string named_values(const Assembly& a, const Product& p) {
  std::string out;
  for (const char* key : p.keys) {
    const std::string item = std::string(key) + " = " + std::to_string(value_of(a, key));
    if (out.find(item) == std::string::npos) out += (out.empty() ? "" : ", ") + item;
  }
  return out;
}

bool overflows(const Assembly& a, const Product& p) {
  int64_t bytes = p.bytes_per_element;
  for (const char* key : p.keys)
    if (__builtin_mul_overflow(bytes, value_of(a, key), &bytes)) return true;
  return false;
}

}  // namespace

void check_size_products(const Config& config, const Assembly& assembly, Diagnostics& diag) {
  for (const Product& p : kProducts)
    if (overflows(assembly, p))
      diag.error(config.file(), named_values(assembly, p) + ": " + p.what +
                                    " would take more than 2^63 bytes, beyond any size the engine can hold; lower them");
}

}  // namespace mh

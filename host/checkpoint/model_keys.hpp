// The run-config keys a saved model fixes: a Megahost checkpoint's
// metadata.json or a Hugging Face config.json. A run that loads the model
// takes each key the user left unset and refuses one that contradicts it,
// so that a model is described once, where it was made.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/metadata.hpp"

namespace mh::ckpt {

struct ModelKey {
  enum Rule {
    kEqual,   // the user's value must equal it
    kAtMost,  // the user's value may be smaller (seq_len: fewer positions)
    kDefault  // taken when the user set none; the user's value wins
  };
  std::string key;               // "hidden"
  nlohmann::json value;          // 768
  std::string field;             // what the file calls it: "hidden_size", "model.hidden"
  nlohmann::json field_value;    // the field's value as the file has it
  Rule rule = kEqual;
  bool zero_means_this = false;  // the key's 0 ("derive it") gives the same value
  std::string section = "model";
  bool path = false;  // a file: compared as the user's value resolved
};

// [model] keys of the model a checkpoint holds, and [data] keys of the
// tokenizer it was trained with.
std::vector<ModelKey> model_keys(const Metadata& m);

// The SwiGLU MLP width Megahost derives from model.ffn_hidden = 0, as Llama
// does when intermediate_size is not given: 256 * ceil(int(8 h / 3) / 256).
int64_t swiglu_ffn(int64_t hidden);

// A float as the shortest decimal that reads back as the same float, as a
// double: 1e-5f is stored 1e-05, not 9.999999747378752e-06.
double shortest_double(float v);

}  // namespace mh::ckpt

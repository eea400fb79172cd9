// Small Hugging Face folders made in C++ for the conversion tests: random
// tensors of a GPT-2 or Llama shape, written as transformers lays them out.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "convert/hf_config.hpp"
#include "convert/hf_folder.hpp"
#include "convert/tensor_map.hpp"

namespace mh::convert::testing {

std::filesystem::path scratch(const std::string& name);
// What `f` throws as an mh::Error, "" when it returns.
std::string message(const std::function<void()>& f);

ckpt::ModelShape tiny_gpt2();   // 2 layers, hidden 8, 2 heads, vocab 200 (padded 256), 16 positions
ckpt::ModelShape tiny_llama();  // 2 layers, hidden 8, 4 heads, 2 kv heads, ffn 12, vocab 130

// Every HF tensor of `m` (names as transformers saves them, prefix
// included), each element a distinct seeded random value.
std::map<std::string, HfTensor> random_tensors(const ckpt::ModelShape& m, uint32_t seed);

// Writes `tensors` with `m`'s config.json into `dir`.
void write_folder(const std::filesystem::path& dir, const ckpt::ModelShape& m,
                  const std::map<std::string, HfTensor>& tensors, const ShardOptions& options = {});

}  // namespace mh::convert::testing

// Export of a LoRA checkpoint's adapters as the folder the `peft` package
// saves and loads (PeftModel.from_pretrained): adapter_config.json and
// adapter_model.safetensors, under the Hugging Face class's module names.
#pragma once

#include <string>

namespace mh::convert {

// `in` is a LoRA checkpoint folder or a folder of them (the newest); `out`
// must not exist. Llama models only: GPT-2's fused, transposed c_attn has
// no per-projection adapters to map Megahost's onto.
void export_peft(const std::string& in, const std::string& out);

}  // namespace mh::convert

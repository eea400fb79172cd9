// megahost_convert: Hugging Face model folders to Megahost checkpoints and
// back (docs/convert.md).
//   megahost_convert --input DIR --output DIR [--dtype f32|bf16] [--max_shard_size 5GB] [--peft]
// The direction comes from what --input holds: metadata.json (a checkpoint,
// or a folder of them: the newest) exports, config.json imports.
// Exit status: 0 converted, 1 a failure writing, 2 bad input, 128 + N on
// signal N (130 SIGINT, 143 SIGTERM: nothing written).
#include <gflags/gflags.h>

#include <megahost/error.hpp>

#include <cctype>
#include <filesystem>
#include <iostream>
#include <string>

#include "checkpoint/store.hpp"
#include "convert/hf_folder.hpp"
#include "convert/hf_to_megahost.hpp"
#include "convert/megahost_to_hf.hpp"
#include "convert/peft_adapter.hpp"
#include "run/stop_signals.hpp"

DEFINE_string(input, "", "a Megahost checkpoint (or a folder of them) or a Hugging Face model folder");
DEFINE_string(output, "", "the folder to write; must not exist");
DEFINE_string(dtype, "f32", "export: the Hugging Face files' dtype, f32 or bf16");
DEFINE_bool(peft, false, "export a LoRA checkpoint's adapters as a PEFT adapter folder instead of the merged model");
DEFINE_string(max_shard_size, "5GB", "export: shard the weights above this size (B, KB, MB, GB or KiB, MiB, GiB)");

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

// "5GB" -> 5e9, "500MiB" -> 500 * 2^20, as transformers reads max_shard_size.
uint64_t parse_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  const std::pair<const char*, uint64_t> units[] = {{"", 1},           {"B", 1},          {"KB", 1000},
                                                    {"MB", 1000'000},  {"GB", 1000'000'000}, {"KIB", 1ull << 10},
                                                    {"MIB", 1ull << 20}, {"GIB", 1ull << 30}};
  std::string upper;
  for (char c : unit) upper += char(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& [name, scale] : units)
    if (digits > 0 && digits <= 12 && upper == name && std::stoull(text.substr(0, digits)) > 0)
      return std::stoull(text.substr(0, digits)) * scale;
  throw mh::Error(MH_INVALID_ARGUMENT, "--max_shard_size \"" + text + "\": give a positive size such as 5GB or 500MiB");
}

std::string dtype_name(const std::string& flag) {
  if (flag == "f32" || flag == "fp32") return "F32";
  if (flag == "bf16") return "BF16";
  throw mh::Error(MH_INVALID_ARGUMENT, "--dtype \"" + flag + "\": give f32 or bf16");
}

int convert() {
  mh::require(!FLAGS_input.empty() && !FLAGS_output.empty(), "give --input DIR and --output DIR");
  namespace fs = std::filesystem;
  const bool megahost = fs::exists(fs::path(FLAGS_input) / mh::ckpt::kMetadataFile) ||
                        !mh::ckpt::complete_checkpoints(FLAGS_input).empty();
  if (mh::convert::is_hf_folder(FLAGS_input)) {
    const mh::ckpt::Metadata m = mh::convert::import_hf(FLAGS_input, FLAGS_output, {});
    std::cout << "wrote checkpoint " << FLAGS_output << ": " << m.tensors.size() << " tensors, " << m.model.layers
              << " layers, hidden " << m.model.hidden << ", vocab " << m.model.vocab_size << " (padded to "
              << m.model.vocab << ")\n";
    return 0;
  }
  mh::require(megahost, "--input " + FLAGS_input + ": holds neither metadata.json (a Megahost checkpoint, or "
                        "step_* folders of them) nor config.json (a Hugging Face model folder)",
              MH_NOT_FOUND);
  if (FLAGS_peft) {
    mh::convert::export_peft(FLAGS_input, FLAGS_output);
    std::cout << "wrote PEFT adapter folder " << FLAGS_output << "\n";
    return 0;
  }
  const std::string note = mh::convert::export_hf(FLAGS_input, FLAGS_output,
                                                  {dtype_name(FLAGS_dtype), parse_size(FLAGS_max_shard_size)});
  if (!note.empty()) std::cerr << "megahost_convert: " << note << "\n";
  std::cout << "wrote Hugging Face folder " << FLAGS_output << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("megahost_convert --input DIR --output DIR [--dtype f32|bf16] [--max_shard_size 5GB] [--peft]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const mh::StopSignals signals;
  try {
    return convert();
  } catch (const mh::Interrupted& e) {
    std::cerr << "megahost_convert: " << e.what() << "\n";
    return mh::interrupted_status(e.signal());
  } catch (const mh::Error& e) {
    std::cerr << "megahost_convert: " << e.what() << "\n";
    return e.code() == MH_INVALID_ARGUMENT || e.code() == MH_NOT_FOUND ? kExitBadInput : kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "megahost_convert: " << e.what() << "\n";
    return kExitFailure;
  }
}

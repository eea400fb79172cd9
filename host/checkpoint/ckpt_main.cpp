// megahost_ckpt: looks inside checkpoints.
//   megahost_ckpt info DIR   step, data position, layout, model, every
//                            tensor with its shape and slices, and each
//                            file's size and checksum verified.
// DIR is a checkpoint folder or a folder of them (the newest is shown).
// Exit status: 0 all verified, 1 a file is missing or corrupt, 2 usage.
#include <megahost/error.hpp>

#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "checkpoint/metadata.hpp"
#include "checkpoint/model_keys.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/store.hpp"

namespace {

using namespace mh::ckpt;

void print_summary(const std::string& dir, const Metadata& m) {
  const Layout& l = m.layout;
  std::printf("checkpoint %s\n", dir.c_str());
  std::printf("  format version %lld, step %lld, %lld samples consumed (global batch %lld, micro-batch %lld), seed %llu\n",
              (long long)m.version, (long long)m.step, (long long)m.consumed_samples, (long long)m.global_batch,
              (long long)m.micro_batch, (unsigned long long)m.seed);
  std::printf("  model (the [model] keys a run that loads it takes):\n");
  for (const ModelKey& k : model_keys(m))
    if (k.section == "model") std::printf("    %-16s %s\n", k.key.c_str(), k.value.dump().c_str());
  std::printf("    %-16s %lld (padded for tensor parallelism)\n", "vocab padded", (long long)m.model.vocab);
  std::printf("  tokenizer: %s\n  compute dtype %s\n", m.tokenizer.dump().c_str(), m.dtype.c_str());
  std::printf("  saved on %lld rank(s): TP %lld%s, PP %lld x %lld chunk(s), DP %lld%s; optimizer state %s\n",
              (long long)l.world, (long long)l.tensor, l.sequence_parallel ? " with SP" : "", (long long)l.pipeline,
              (long long)l.virtual_stages, (long long)l.data, l.distributed_optimizer ? " (distributed optimizer)" : "",
              m.optimizer ? "saved" : "not saved");
}

void print_tensors(const Metadata& m) {
  uint64_t elements = 0;
  std::printf("  %-48s %16s %8s\n", "tensor", "shape", "slices");
  for (const auto& [name, t] : m.tensors) {
    const std::string shape = "[" + std::to_string(t.shape[0]) + ", " + std::to_string(t.shape[1]) + "]";
    std::printf("  %-48s %16s %8zu\n", name.c_str(), shape.c_str(), t.slices.size());
    elements += uint64_t(t.shape[0] * t.shape[1]);
  }
  std::printf("  %zu tensors, %llu elements\n", m.tensors.size(), (unsigned long long)elements);
}

// Returns the number of files that fail.
int verify_files(const std::string& dir, const Metadata& m) {
  int bad = 0;
  uint64_t total = 0;
  for (const auto& [name, f] : m.files) {
    std::string verdict = "ok";
    try {
      auto map = std::make_unique<mh::data::MappedFile>(dir + "/" + name, "the checkpoint is incomplete");
      verify_file(*map, f);
      mh::safetensors::File file(std::move(map));
    } catch (const std::exception& e) {
      verdict = std::string("FAILED: ") + e.what();
    }
    bad += verdict != "ok";
    total += f.bytes;
    std::printf("  %-28s %14llu bytes  xxh3 %s  %s\n", name.c_str(), (unsigned long long)f.bytes, f.xxh3.c_str(),
                verdict.c_str());
  }
  std::printf("  %zu file(s), %.2f MiB: %s\n", m.files.size(), double(total) / double(1 << 20),
              bad == 0 ? "every checksum verified" : "VERIFICATION FAILED");
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) != "info") {
    std::cerr << "usage: megahost_ckpt info DIR   (a checkpoint folder, or a folder of them)\n";
    return 2;
  }
  try {
    const std::string dir = resolve_load(argv[2], "");
    const Metadata m = read_metadata(dir);
    print_summary(dir, m);
    print_tensors(m);
    return verify_files(dir, m) == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "megahost_ckpt: " << e.what() << "\n";
    return 1;
  }
}

#include "convert/hf_folder.hpp"

#include <megahost/error.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/json_limits.hpp"
#include "checkpoint/metadata.hpp"
#include "checkpoint/store.hpp"
#include "data/regular_file.hpp"
#include "run/stop_signals.hpp"

namespace mh::convert {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFix = "the Hugging Face folder is incomplete; download or save it again";

std::string read_text(const std::string& path) {
  return data::read_regular_file(path, kFix);
}

bool is_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") || name.ends_with(".rotary_emb.inv_freq");
}

std::string without_prefix(const std::string& name) {
  for (const char* prefix : {"transformer.", "model."})
    if (name.starts_with(prefix)) return name.substr(std::strlen(prefix));
  return name;
}

float from_bf16(uint16_t v) {
  const uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as torch's .to(torch.bfloat16) does; NaN stays NaN.
uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x40);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

std::vector<std::byte> encode(const std::vector<float>& data, const std::string& dtype) {
  if (dtype == "F32") {
    const auto bytes = std::as_bytes(std::span(data));
    return {bytes.begin(), bytes.end()};
  }
  std::vector<std::byte> out(data.size() * 2);
  for (size_t i = 0; i < data.size(); ++i) {
    const uint16_t v = to_bf16(data[i]);
    std::memcpy(out.data() + 2 * i, &v, 2);
  }
  return out;
}

uint64_t entry_bytes(const HfEntry& e, const std::string& dtype) {
  uint64_t n = safetensors::dtype_bytes(dtype);
  for (int64_t d : e.shape) n *= uint64_t(d);
  return n;
}

// Entries in order, a new shard whenever the next would pass the limit.
std::vector<std::vector<size_t>> plan_shards(const std::vector<HfEntry>& entries, const ShardOptions& o) {
  std::vector<std::vector<size_t>> shards(1);
  uint64_t size = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const uint64_t bytes = entry_bytes(entries[i], o.dtype);
    if (!shards.back().empty() && size + bytes > o.max_shard_bytes) {
      shards.emplace_back();
      size = 0;
    }
    shards.back().push_back(i);
    size += bytes;
  }
  return shards;
}

std::string shard_name(size_t k, size_t n) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return name;
}

}  // namespace

bool is_hf_folder(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kConfigFile, ec) && !fs::exists(fs::path(dir) / ckpt::kMetadataFile, ec);
}

std::map<std::string, std::string> parse_shard_index(std::string_view text, const std::string& path) {
  const nlohmann::json j = parse_json_limited(text, path, 8);
  require(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
          path + ": no \"weight_map\" object; " + kFix);
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : j["weight_map"].items()) {
    require(file.is_string(), path + ": \"weight_map\"[\"" + name + "\"] is not a file name");
    const std::string f = file.get<std::string>();
    require(!f.empty() && f.find('/') == std::string::npos && f[0] != '.',
            path + ": shard \"" + f + "\" of tensor '" + name + "' is not a plain file name inside the folder");
    out.emplace(name, f);
  }
  return out;
}

HfFolder::HfFolder(const std::string& dir) : dir_(dir) {
  const fs::path index = fs::path(dir) / kIndexFile;
  if (!fs::exists(index)) {
    add_file(kSingleFile);
    return;
  }
  const std::map<std::string, std::string> map = parse_shard_index(read_text(index.string()), index.string());
  std::map<std::string, int> shards;
  for (const auto& [name, file] : map) shards[file] = 0;
  for (const auto& [file, unused] : shards) add_file(file);
  size_t listed = 0;
  for (const auto& [name, file] : map) {
    if (is_buffer(name)) continue;
    ++listed;
    require(tensors_.count(without_prefix(name)) == 1 && tensors_.at(without_prefix(name)).file->path() == dir + "/" + file,
            index.string() + ": tensor '" + name + "' is not in " + file + ", where the index says it is; " + kFix);
  }
  require(listed == tensors_.size(), index.string() + ": the shards hold " + std::to_string(tensors_.size()) +
                                             " tensors, the index lists " + std::to_string(listed) + "; " + kFix);
}

void HfFolder::add_file(const std::string& name) {
  const std::string path = dir_ + "/" + name;
  const auto& file = *files_.emplace_back(std::make_unique<safetensors::File>(path, kFix));
  for (const auto& [key, info] : file.header().tensors) {
    if (is_buffer(key)) continue;
    const std::string short_name = without_prefix(key);
    require(tensors_.emplace(short_name, Where{&file, key}).second,
            path + ": tensor '" + key + "' appears twice in the folder (with and without its prefix?)");
  }
}

std::vector<std::string> HfFolder::names() const {
  std::vector<std::string> out;
  for (const auto& [name, where] : tensors_) out.push_back(name);
  return out;
}

HfTensor HfFolder::get(const std::string& name) const {
  auto it = tensors_.find(name);
  require(it != tensors_.end(), dir_ + ": no tensor '" + name + "' (nor 'transformer." + name + "', 'model." + name +
                                    "'); the weights do not match config.json",
          MH_NOT_FOUND);
  const safetensors::File& file = *it->second.file;
  const safetensors::TensorInfo& info = file.header().tensors.at(it->second.key);
  require(info.dtype == "F32" || info.dtype == "BF16",
          file.path() + ": tensor '" + it->second.key + "' is " + info.dtype +
              "; Megahost reads F32 and BF16 (load the model with dtype=torch.float32 or torch.bfloat16 and "
              "save_pretrained it again)");
  require(!info.shape.empty() && info.shape.size() <= 2,
          file.path() + ": tensor '" + it->second.key + "' has " + std::to_string(info.shape.size()) +
              " dimensions; the model's weights have 1 or 2");
  const std::span<const std::byte> bytes = file.data(it->second.key);
  HfTensor t{info.shape, {}};
  if (info.dtype == "F32") {
    t.data.resize(bytes.size() / 4);
    std::memcpy(t.data.data(), bytes.data(), bytes.size());
  } else {
    t.data.resize(bytes.size() / 2);
    for (size_t i = 0; i < t.data.size(); ++i) {
      uint16_t v;
      std::memcpy(&v, bytes.data() + 2 * i, 2);
      t.data[i] = from_bf16(v);
    }
  }
  return t;
}

StagedFolder::StagedFolder(const std::string& out, const std::string& what) : out_(out) {
  const fs::path p = fs::absolute(out).lexically_normal();
  require(!p.filename().empty(), "--output " + out + ": give a folder name");
  require(!fs::exists(p), "--output " + out + ": exists; the " + what + " is written only to a new folder");
  // A name of our own (mkdtemp makes it new), so no entry of the user's is
  // replaced or removed, whatever it is called.
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  temp_ = (p.parent_path() / (".tmp_" + p.filename().string() + "_XXXXXX")).string();
  require(::mkdtemp(temp_.data()) != nullptr,
          "--output " + out + ": cannot create a folder beside it: " + std::strerror(errno), MH_UNAVAILABLE);
}

StagedFolder::~StagedFolder() {
  std::error_code ec;
  if (!committed_) fs::remove_all(temp_, ec);
}

void StagedFolder::commit() {
  ckpt::sync_dir(temp_);
  fs::rename(temp_, out_);
  committed_ = true;
  ckpt::sync_dir(fs::absolute(out_).lexically_normal().parent_path().string());
}

void write_hf_folder(const std::string& out, const std::string& config_json,
                     const std::vector<std::pair<std::string, std::string>>& files, const std::vector<HfEntry>& entries,
                     const ShardOptions& options, const std::function<const std::vector<float>&(size_t)>& data) {
  require(options.dtype == "F32" || options.dtype == "BF16", "--dtype: \"" + options.dtype + "\" (f32 or bf16)");
  StagedFolder staged(out, "Hugging Face model");
  const std::string& temp = staged.path();
  ckpt::write_synced(temp + "/" + kConfigFile, config_json);
  for (const auto& [name, text] : files) ckpt::write_synced(temp + "/" + name, text);
  const std::vector<std::vector<size_t>> shards = plan_shards(entries, options);
  nlohmann::ordered_json weight_map;
  uint64_t total = 0;
  std::vector<std::byte> bytes;
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string file = shards.size() == 1 ? kSingleFile : shard_name(k, shards.size());
    std::vector<safetensors::Entry> header;
    for (size_t i : shards[k]) {
      header.push_back({entries[i].name, options.dtype, entries[i].shape});
      weight_map[entries[i].name] = file;
      total += entry_bytes(entries[i], options.dtype);
    }
    safetensors::write_file(temp + "/" + file, header, {{"format", "pt"}}, [&](size_t j) {
      stop_if_signalled("writing " + out + " (" + entries[shards[k][j]].name + "); the partial folder was removed");
      bytes = encode(data(shards[k][j]), options.dtype);
      return std::span<const std::byte>(bytes);
    });
  }
  if (shards.size() > 1) {
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    ckpt::write_synced(temp + "/" + kIndexFile, index.dump(2) + "\n");
  }
  staged.commit();
}

}  // namespace mh::convert

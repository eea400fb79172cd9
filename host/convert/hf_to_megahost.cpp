#include "convert/hf_to_megahost.hpp"

#include <megahost/error.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "checkpoint/safetensors.hpp"
#include "checkpoint/store.hpp"
#include "convert/hf_config.hpp"
#include "convert/hf_folder.hpp"
#include "convert/tensor_map.hpp"
#include "run/stop_signals.hpp"

namespace mh::convert {
namespace fs = std::filesystem;
namespace {

// Every tensor of the folder must be one the model uses: anything else means
// config.json describes another model than the weights.
void check_names(const HfFolder& folder, const std::vector<Link>& links, const HfModel& hf) {
  std::set<std::string> used;
  for (const Link& l : links) used.insert(l.hf.begin(), l.hf.end());
  // A tied output layer is the embedding; transformers ignores a stored copy too.
  if (hf.shape.tie_embeddings) used.insert("lm_head.weight");
  for (const std::string& name : folder.names())
    require(used.count(name) == 1, folder.dir() + ": tensor '" + name + "' is not part of the " + class_name(hf.cls) +
                                       " that config.json describes; convert a folder whose weights match it");
}

ckpt::ModelShape import_shape(const HfModel& hf, int64_t seq_len, const std::string& in) {
  ckpt::ModelShape m = hf.shape;
  if (seq_len == 0) return m;
  require(seq_len <= m.seq_len || m.position == "rope",
          "model.seq_len = " + std::to_string(seq_len) + " but " + in + "/config.json has n_positions = " +
              std::to_string(m.seq_len) + "; the learned position table has no more rows (lower seq_len)");
  m.seq_len = seq_len;
  return m;
}

}  // namespace

ckpt::Metadata import_hf(const std::string& in, const std::string& out, const ImportOptions& options) {
  const HfModel hf = read_hf_config(in);
  const HfFolder folder(in);
  const ckpt::ModelShape shape = import_shape(hf, options.seq_len, in);
  const std::vector<Link> links = model_links(shape);
  check_names(folder, links, hf);

  StagedFolder staged(out, "checkpoint");
  const std::string& temp = staged.path();
  const std::string file = ckpt::rank_file(0);
  ckpt::Metadata meta = options.run;
  meta.step = 0;
  meta.consumed_samples = 0;
  meta.optimizer = false;
  meta.model = shape;
  meta.layout = ckpt::Layout{};
  if (meta.dtype.empty()) meta.dtype = "fp32";
  if (meta.schedule.is_null()) meta.schedule = nlohmann::json::object();
  if (meta.tokenizer.is_null()) meta.tokenizer = {{"vocab_padded", shape.vocab}};
  std::vector<safetensors::Entry> entries;
  for (const Link& l : links) {
    const auto global = megahost_shape(l.megahost, shape);
    const std::string key = l.megahost + ":0,0";
    entries.push_back({key, "F32", {global[0], global[1]}});
    meta.tensors[l.megahost] = ckpt::TensorEntry{global, "F32", {{file, key, ckpt::Rect{0, 0, global[0], global[1]}}}};
  }
  Matrix current;
  const safetensors::Written w = safetensors::write_file(
      temp + "/" + file, entries, {{"format", ckpt::kFormatName}, {"rank", "0"}}, [&](size_t i) {
        stop_if_signalled("importing " + in + " (" + links[i].megahost + "); the partial checkpoint was removed");
        current = to_megahost(links[i], shape, [&](const std::string& name) { return folder.get(name); });
        return std::as_bytes(std::span(current.data));
      });
  meta.files[file] = ckpt::FileEntry{w.bytes, safetensors::hex(w.xxh3)};
  const std::string text = ckpt::to_json(meta).dump(1);
  ckpt::parse_metadata(text, temp + "/" + ckpt::kMetadataFile);  // checked as a loader will read it
  ckpt::write_synced(temp + "/" + ckpt::kMetadataFile, text);
  staged.commit();
  return meta;
}

namespace {

// $TMPDIR (or /tmp), checked here so that a missing one is named as the
// cause, not reported as temp_directory_path's bare system error.
std::string temp_root(const std::string& in) {
  const char* set = std::getenv("TMPDIR");
  const std::string dir = set != nullptr && *set != '\0' ? set : "/tmp";
  std::error_code ec;
  require(fs::is_directory(dir, ec), (set != nullptr && *set != '\0' ? "TMPDIR=" : "the temporary folder ") + dir +
                                         " is not a folder; importing " + in +
                                         " writes its weights there in f32: set TMPDIR to a folder with room",
          MH_UNAVAILABLE);
  return dir;
}

}  // namespace

TemporaryImport::TemporaryImport(const std::string& in, const ImportOptions& options) {
  const std::string dir = temp_root(in);
  std::string pattern = dir + "/megahost_import_XXXXXX";
  require(::mkdtemp(pattern.data()) != nullptr,
          "cannot create a temporary folder in " + dir + " (TMPDIR) to import " + in + ": " + std::strerror(errno),
          MH_UNAVAILABLE);
  root_ = pattern;
  checkpoint_ = root_ + "/checkpoint";
  try {
    import_hf(in, checkpoint_, options);
  } catch (...) {
    fs::remove_all(root_);
    throw;
  }
}

TemporaryImport::~TemporaryImport() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

}  // namespace mh::convert

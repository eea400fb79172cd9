// Small files megahost reads beside what it is given: a dataset's
// PREFIX.range sidecar and a checkpoint folder's megahost_run.json.
#include <megahost/error.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "checkpoint/folder_owner.hpp"
#include "data/indexed_dataset.hpp"
#include "data/token_range.hpp"
#include "scratch.hpp"
#include "targets.hpp"

namespace mh::fuzz {
namespace {

// A two-document dataset in the scratch folder, written once; returns its prefix.
const std::string& sidecar_dataset() {
  static const std::string prefix = [] {
    const std::string p = std::filesystem::path(scratch_file("range_anchor", "")).parent_path() / "range";
    data::IndexedDatasetWriter writer(p, data::TokenDType::kUint16);
    writer.add_document(std::vector<int32_t>{3, 1, 4});
    writer.add_document(std::vector<int32_t>{1, 5});
    writer.finish();
    return p;
  }();
  return prefix;
}

// The dataset's true sidecar lines "bin_bytes N" and "idx_hash H", which
// the input names $BIN and $HASH so that mutations reach past the stamp.
std::string with_stamp(std::string text) {
  static const std::pair<std::string, std::string> stamp = [] {
    data::dataset_token_range(data::IndexedDataset(sidecar_dataset()));  // writes a believed sidecar
    std::ifstream in(sidecar_dataset() + ".range");
    std::string header, key, bin, hash;
    std::getline(in, header);
    in >> key >> bin >> key >> hash;
    return std::pair{bin, hash};
  }();
  for (const auto& [name, value] : {std::pair{std::string("$BIN"), stamp.first}, {"$HASH", stamp.second}})
    for (size_t at; (at = text.find(name)) != std::string::npos;) text.replace(at, name.size(), value);
  return text;
}

}  // namespace

void token_range_sidecar(Input input) {
  const std::string text = with_stamp(std::string(as_text(input)));
  std::ofstream(sidecar_dataset() + ".range", std::ios::binary | std::ios::trunc) << text;
  try {
    const data::IndexedDataset dataset(sidecar_dataset());
    data::dataset_token_range(dataset);
    data::check_token_range(dataset, 6, "data.path", "fix");
  } catch (const Error&) {
  }
}

void checkpoint_owner(Input input) {
  const std::string path = scratch_file(ckpt::kOwnerFile, as_text(input));
  try {
    ckpt::folder_run(std::filesystem::path(path).parent_path().string());
  } catch (const Error&) {
  }
}

}  // namespace mh::fuzz

#include "checkpoint/tensor_reader.hpp"

#include <megahost/error.hpp>

#include <algorithm>

#include "checkpoint/store.hpp"

namespace mh::ckpt {

const safetensors::File& TensorReader::file(const std::string& name) {
  auto it = open_.find(name);
  if (it != open_.end()) return *it->second;
  auto map = std::make_unique<data::MappedFile>(dir_ + "/" + name, "the checkpoint is incomplete; load an earlier one");
  verify_file(*map, meta_.files.at(name));
  return *open_.emplace(name, std::make_unique<safetensors::File>(std::move(map))).first->second;
}

const float* TensorReader::whole(const std::string& tensor, const TensorEntry& entry, const Rect& want) {
  for (const SliceRef& s : entry.slices)
    if (s.rect == want) return slice_data(tensor, s);
  return nullptr;
}

int64_t TensorReader::read(const std::string& tensor, const TensorEntry& entry, const Rect& want, float* out) {
  int64_t covered = 0;
  for (const SliceRef& s : entry.slices) {
    Rect part;
    if (!intersect(s.rect, want, part)) continue;
    const float* src = slice_data(tensor, s);
    for (int64_t r = part.row; r < part.row + part.rows; ++r)
      std::copy_n(src + (r - s.rect.row) * s.rect.cols + (part.col - s.rect.col), part.cols,
                  out + (r - want.row) * want.cols + (part.col - want.col));
    covered += part.numel();
  }
  return covered;
}

const float* TensorReader::slice_data(const std::string& tensor, const SliceRef& s) {
  const safetensors::File& f = file(s.file);
  const auto& info = f.header().tensors.at(s.key);
  require(info.dtype == "F32" && info.shape == std::vector<int64_t>{s.rect.rows, s.rect.cols},
          f.path() + ": tensor '" + s.key + "' is not the F32 [" + std::to_string(s.rect.rows) + ", " +
              std::to_string(s.rect.cols) + "] slice of '" + tensor + "' the index describes");
  return reinterpret_cast<const float*>(f.data(s.key).data());
}

}  // namespace mh::ckpt

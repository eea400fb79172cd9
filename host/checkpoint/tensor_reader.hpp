// Reads rectangles of a checkpoint's global tensors from the slices its
// index lists, whatever layout wrote them: the one reader behind loading a
// run (each rank its own rectangles) and exporting a model (whole tensors).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "checkpoint/metadata.hpp"
#include "checkpoint/safetensors.hpp"

namespace mh::ckpt {

class TensorReader {
 public:
  // `meta` is the checkpoint's metadata (read_metadata(dir)); it must outlive the reader.
  TensorReader(const std::string& dir, const Metadata& meta) : dir_(dir), meta_(meta) {}

  // Fills `out` (want.rows x want.cols floats, row-major) with rectangle
  // `want` of tensor `entry`, named `tensor` in errors; returns the elements
  // the slices covered. Each file is verified against the index (size and
  // checksum) the first time it is read.
  int64_t read(const std::string& tensor, const TensorEntry& entry, const Rect& want, float* out);
  // The mapped floats of `want` when one slice is exactly that rectangle
  // (a run resuming on its own layout): read in place, without a copy.
  // nullptr otherwise.
  const float* whole(const std::string& tensor, const TensorEntry& entry, const Rect& want);

 private:
  const safetensors::File& file(const std::string& name);
  const float* slice_data(const std::string& tensor, const SliceRef& s);

  std::string dir_;
  const Metadata& meta_;
  std::map<std::string, std::unique_ptr<safetensors::File>> open_;
};

}  // namespace mh::ckpt

#include "engine/kv_cache.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <string>

namespace mh {

KvCache::KvCache(Device& device, const ModelDims& d, std::span<const int64_t> layers, int64_t slots,
                 int64_t capacity)
    : groups_(d.local_kv_heads()), head_dim_(d.head_dim()), slots_(slots), capacity_(capacity),
      layers_(layers.begin(), layers.end()) {
  const int64_t n = slots * groups_ * capacity * head_dim_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    keys_.emplace_back(device, MemCategory::kKvCache, n, device.info().compute_dtype);
    values_.emplace_back(device, MemCategory::kKvCache, n, device.info().compute_dtype);
  }
}

size_t KvCache::index(int64_t layer) const {
  const auto it = std::find(layers_.begin(), layers_.end(), layer);
  require(it != layers_.end(), "the KV cache holds no layer " + std::to_string(layer));
  return size_t(it - layers_.begin());
}

MH_Tensor KvCache::at(const Buffer& b, int64_t slot, int64_t first, int64_t count) const {
  const TypedPtr base = b.ptr() + (slot * groups_ * capacity_ + first) * head_dim_;
  return view(base.data, base.dtype, {groups_, count, head_dim_}, {capacity_ * head_dim_, head_dim_, 1});
}

MH_Tensor KvCache::keys(int64_t layer, int64_t slot, int64_t first, int64_t count) const {
  return at(keys_[index(layer)], slot, first, count);
}

MH_Tensor KvCache::values(int64_t layer, int64_t slot, int64_t first, int64_t count) const {
  return at(values_[index(layer)], slot, first, count);
}

}  // namespace mh

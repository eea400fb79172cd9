#include "engine/gradient_dump.hpp"

#include <megahost/error.hpp>

#include <optional>
#include <vector>

#include "report/replaced_file.hpp"

namespace mh {
namespace {

// The full [global_rows, global_cols] gradient of one parameter on the
// tensor group's rank 0. An all-gather concatenates shards: for a row
// shard that is the full matrix; a column shard comes out [t, rows, cols/t].
// Expert weights are row blocks of the expert group's ranks, in rank order.
std::vector<float> gather(Device& device, const ParamSet& params, int id, Collectives& tensor, Collectives& experts) {
  const ParamInfo& p = params.info(id);
  std::vector<float> local(size_t(p.numel()));
  device.to_host(local.data(), params.grad(id), local.size() * sizeof(float));
  const bool expert = p.group == ParamGroup::kExpertDecay;
  Collectives& group = expert ? experts : tensor;
  if ((p.shard == MH_SHARD_NONE && !expert) || group.size() == 1) return local;
  const int64_t t = group.size();
  Buffer all(device, MemCategory::kComm, p.numel() * t);
  group.all_gather(params.grad(id), all.f32(), p.numel());
  std::vector<float> parts(size_t(p.numel() * t));
  device.to_host(parts.data(), all.data(), parts.size() * sizeof(float));
  if (p.shard == MH_SHARD_ROWS || expert) return parts;
  std::vector<float> full(parts.size());
  for (int64_t k = 0; k < t; ++k)
    for (int64_t r = 0; r < p.rows; ++r)
      for (int64_t c = 0; c < p.cols; ++c)
        full[size_t(r * p.global_cols + k * p.cols + c)] = parts[size_t((k * p.rows + r) * p.cols + c)];
  return full;
}

}  // namespace

void dump_gradients(Device& device, const ParamSet& params, Collectives& tensor_group, Collectives& expert_group,
                    const std::string& path, bool write) {
  std::optional<ReplacedFile> file;
  if (write) file.emplace(path);
  for (size_t id = 0; id < params.infos().size(); ++id) {
    if (!params.trainable(int(id))) continue;  // a frozen base has no gradient
    std::vector<float> full = gather(device, params, int(id), tensor_group, expert_group);
    if (!write) continue;
    const std::string& name = params.info(int(id)).name;
    const uint32_t len = uint32_t(name.size());
    const uint64_t n = full.size();
    std::ofstream& out = file->out();
    out.write(reinterpret_cast<const char*>(&len), sizeof len);
    out.write(name.data(), len);
    out.write(reinterpret_cast<const char*>(&n), sizeof n);
    out.write(reinterpret_cast<const char*>(full.data()), std::streamsize(n * sizeof(float)));
  }
  if (write) file->commit();
}

}  // namespace mh

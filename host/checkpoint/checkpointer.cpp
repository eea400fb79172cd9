#include "checkpoint/checkpointer.hpp"

#include <megahost/error.hpp>

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "checkpoint/folder_owner.hpp"
#include "checkpoint/failpoint.hpp"
#include "checkpoint/load_pass.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/store.hpp"

namespace mh::ckpt {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string slice_key(const Region& r) {
  return r.tensor + ":" + std::to_string(r.rect.row) + "," + std::to_string(r.rect.col);
}

uint64_t region_bytes(const Region& r) { return uint64_t(r.rect.numel()) * sizeof(float); }

nlohmann::json slices_json(const std::vector<Region>& regions) {
  nlohmann::json out = nlohmann::json::array();
  for (const Region& r : regions)
    out.push_back({{"tensor", r.tensor},
                   {"global_shape", r.shape},
                   {"key", slice_key(r)},
                   {"offset", {r.rect.row, r.rect.col}},
                   {"shape", {r.rect.rows, r.rect.cols}}});
  return out;
}

struct HostCopy {
  void* dst;
  const void* src;
  uint64_t bytes;
};

// The snapshot is the whole of an asynchronous save's stall, and one core
// does not reach the memory's bandwidth: on the CPU (the device is the
// host) the rank's kernel threads each copy a share of every region.
void copy_on_threads(const std::vector<HostCopy>& copies, int threads) {
  auto share = [&](int t) {
    for (const HostCopy& c : copies) {
      const uint64_t begin = c.bytes * uint64_t(t) / uint64_t(threads), end = c.bytes * uint64_t(t + 1) / uint64_t(threads);
      std::memcpy(static_cast<char*>(c.dst) + begin, static_cast<const char*>(c.src) + begin, end - begin);
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(share, t);
  share(0);
  for (std::thread& h : helpers) h.join();
}

}  // namespace

Checkpointer::Checkpointer(Device& device, Collectives& world, int32_t rank, RankState state, Options options)
    : device_(device), world_(world), rank_(rank), state_(std::move(state)), options_(std::move(options)) {}

Checkpointer::~Checkpointer() {
  if (writer_.joinable()) writer_.join();
  if (staging_) device_.memory().on_free(MemCategory::kCheckpoint, staging_floats_ * sizeof(float));
}

bool Checkpointer::due(int64_t step, int64_t last) const {
  return saving() && (step == last || (options_.interval > 0 && step % options_.interval == 0));
}

uint64_t Checkpointer::save_bytes() const {
  uint64_t bytes = 0;
  for (const Region& r : state_.written) bytes += region_bytes(r);
  return bytes;
}

void Checkpointer::dry_save() {
  if (!options_.async) return;
  device_.memory().on_alloc(MemCategory::kCheckpoint, save_bytes());
  device_.memory().on_free(MemCategory::kCheckpoint, save_bytes());
}

WriterState Checkpointer::writer_state() const { return WriterState(writer_state_.load()); }

void Checkpointer::write_rank_files(const std::string& temp, const std::vector<std::span<const std::byte>>& data) {
  std::string file;
  uint64_t bytes = 0, xxh3 = 0;
  if (!state_.written.empty()) {
    file = rank_file(rank_);
    std::vector<safetensors::Entry> entries;
    for (const Region& r : state_.written) entries.push_back({slice_key(r), "F32", {r.rect.rows, r.rect.cols}});
    const safetensors::Written w = safetensors::write_file(
        temp + "/" + file, entries, {{"format", kFormatName}, {"rank", std::to_string(rank_)}},
        [&](size_t i) { return data[i]; });
    bytes = w.bytes;
    xxh3 = w.xxh3;
  }
  failpoint("checkpoint.rank_file_written");
  const nlohmann::json index = {
      {"file", file}, {"bytes", bytes}, {"xxh3", safetensors::hex(xxh3)}, {"slices", slices_json(state_.written)}};
  write_synced(temp + "/" + rank_index(rank_), index.dump());
}

// The written regions as host bytes: the device memory itself on the CPU
// (synchronous saves), else a copy in host memory.
std::vector<std::span<const std::byte>> Checkpointer::snapshot() {
  const bool direct = !options_.async && device_.info().device_type == MH_DEVICE_CPU;
  if (!direct && !staging_) {
    staging_floats_ = save_bytes() / sizeof(float);
    staging_.reset(new float[staging_floats_]);
    device_.memory().on_alloc(MemCategory::kCheckpoint, staging_floats_ * sizeof(float));
  }
  std::vector<std::span<const std::byte>> spans;
  std::vector<HostCopy> copies;
  size_t at = 0;
  for (const Region& r : state_.written) {
    const float* src = r.data;
    if (!direct) {
      copies.push_back({staging_.get() + at, r.data, region_bytes(r)});
      src = staging_.get() + at;
      at += size_t(r.rect.numel());
    }
    spans.push_back(std::as_bytes(std::span(src, size_t(r.rect.numel()))));
  }
  if (device_.info().device_type == MH_DEVICE_CPU) {
    copy_on_threads(copies, std::max(1, device_.info().threads));
  } else {
    for (const HostCopy& c : copies) device_.to_host(c.dst, c.src, c.bytes);
  }
  return spans;
}

std::vector<int32_t> Checkpointer::gather_states(int32_t mine) {
  const float sent = float(mine);
  std::vector<float> all(size_t(world_.size()));
  world_.all_gather_host(&sent, all.data(), 1);
  return std::vector<int32_t>(all.begin(), all.end());
}

const std::string& Checkpointer::run_id() {
  if (options_.run.empty()) {
    const std::optional<std::string> run = folder_run(options_.dir);
    require(run.has_value(), "checkpoint.dir = \"" + options_.dir + "\": its run identity (" + kOwnerFile +
                                 ") is missing; another process removed it while this run was saving");
    options_.run = *run;
  }
  return options_.run;
}

void Checkpointer::save(const Metadata& meta) {
  if (!saving()) return;
  wait();
  started_ = Clock::now();
  if (rank_ == 0) prepare_temp(options_.dir, meta.step, run_id());
  world_.barrier();
  const std::string temp = temp_dir(options_.dir, meta.step, run_id());
  pending_meta_ = meta;
  pending_ = true;
  if (options_.async) {
    auto data = snapshot();
    writer_state_ = kWriting;
    writer_ = std::thread([this, temp, data = std::move(data)] {
      try {
        write_rank_files(temp, data);
        writer_state_ = kIdle;
      } catch (...) {
        writer_error_ = std::current_exception();
        writer_state_ = kFailed;
      }
    });
    stall_s_ = since(started_);
    return;
  }
  int32_t mine = kIdle;
  try {
    write_rank_files(temp, snapshot());
  } catch (...) {
    writer_error_ = std::current_exception();
    mine = kFailed;
  }
  settle(gather_states(mine));
  stall_s_ = since(started_);
}

void Checkpointer::settle(const std::vector<int32_t>& states) {
  if (!pending_ || std::count(states.begin(), states.end(), kWriting) > 0) return;
  if (writer_.joinable()) writer_.join();
  commit_and_report(states);
}

void Checkpointer::wait() {
  if (!pending_) return;
  if (writer_.joinable()) writer_.join();
  settle(gather_states(writer_state()));
}

void Checkpointer::commit_and_report(const std::vector<int32_t>& states) {
  pending_ = false;
  const int64_t step = pending_meta_.step;
  if (writer_error_) std::rethrow_exception(std::exchange(writer_error_, nullptr));
  auto failed = std::find(states.begin(), states.end(), kFailed);
  require(failed == states.end(), "checkpoint of step " + std::to_string(step) + ": rank " +
                                      std::to_string(failed - states.begin()) +
                                      " could not write its file; the earlier checkpoints are untouched",
          MH_UNAVAILABLE);
  if (rank_ != 0) return;
  const Metadata written = commit(options_.dir, pending_meta_, int32_t(states.size()), options_.keep, run_id());
  uint64_t bytes = 0;
  for (const auto& [name, f] : written.files) bytes += f.bytes;
  const double seconds = since(started_);
  LOG(INFO) << "saved checkpoint " << options_.dir << "/" << step_name(step) << ": " << written.files.size()
            << " file(s), " << double(bytes) / double(1 << 20) << " MiB in " << seconds << " s ("
            << double(bytes) / 1e6 / seconds << " MB/s" << (options_.async ? ", written in the background)" : ")");
}

void Checkpointer::load(const std::string& path, const Metadata& meta) {
  // On the CPU the regions are host memory, filled in place; on another
  // device they are filled in host memory and copied over once every file
  // read matched its checksum.
  const bool direct = device_.info().device_type == MH_DEVICE_CPU;
  std::vector<const Region*> loaded;
  uint64_t floats = 0;
  for (const Region& r : state_.held) {
    auto it = meta.tensors.find(r.tensor);
    const bool moment = r.tensor.rfind("optimizer.", 0) == 0;
    if (it == meta.tensors.end() && moment && !meta.optimizer) continue;
    require(it != meta.tensors.end(), path + "/" + kMetadataFile + ": tensor '" + r.tensor +
                                          "' is missing from the index; the checkpoint is incomplete or of another model");
    require(it->second.shape == r.shape, path + ": tensor '" + r.tensor + "' is [" + std::to_string(it->second.shape[0]) +
                                             ", " + std::to_string(it->second.shape[1]) + "], this model's is [" +
                                             std::to_string(r.shape[0]) + ", " + std::to_string(r.shape[1]) + "]");
    loaded.push_back(&r);
    floats += uint64_t(r.rect.numel());
  }
  std::vector<float> host(direct ? 0 : floats);
  LoadPass pass(path, meta);
  uint64_t at = 0;
  for (const Region* r : loaded) {
    float* out = direct ? r->data : host.data() + at;
    const int64_t covered = pass.add(r->tensor, meta.tensors.at(r->tensor), r->rect, out);
    require(covered == r->rect.numel(), path + ": tensor '" + r->tensor + "' has " + std::to_string(covered) +
                                            " of the " + std::to_string(r->rect.numel()) + " elements this rank needs");
    at += uint64_t(r->rect.numel());
  }
  pass.run();
  if (direct) return;
  at = 0;
  for (const Region* r : loaded) {
    device_.to_device(r->data, host.data() + at, region_bytes(*r));
    at += uint64_t(r->rect.numel());
  }
}

}  // namespace mh::ckpt

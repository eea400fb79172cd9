// One rank's side of saving and loading checkpoints. Every rank writes the
// regions it is the one writer of into its own safetensors file, in
// parallel; the leader (world rank 0) commits the checkpoint once every
// rank is done. An asynchronous save snapshots the regions into host
// memory and writes from a background thread while training goes on; the
// ranks agree each step (the trainer's per-step exchange) on whether every
// writer is done, and the leader commits then.
#pragma once

#include <atomic>
#include <chrono>
#include <span>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/metadata.hpp"
#include "checkpoint/rank_state.hpp"
#include "engine/collectives.hpp"
#include "engine/device.hpp"

namespace mh::ckpt {

struct Options {
  std::string dir;    // where checkpoints go; empty: none
  std::string load;   // "", "auto" or a path
  int64_t interval = 0, keep = 0;
  bool async = false, save_optimizer = true;
  bool overwrite = false;  // take a folder holding another run's checkpoints (folder_owner.hpp)
  std::string run;         // the run's identity in dir; empty: read from the folder at the first save
};

// A rank's writer, as exchanged between ranks each step.
enum WriterState : int32_t { kIdle = 0, kWriting = 1, kFailed = 2 };

class Checkpointer {
 public:
  Checkpointer(Device& device, Collectives& world, int32_t rank, RankState state, Options options);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  bool saving() const { return !options_.dir.empty(); }
  // Whether step `step` of a run ending at `last` saves.
  bool due(int64_t step, int64_t last) const;
  // Saves `meta` (its step, data position, ...) with this rank's regions;
  // every rank calls it. Synchronous: returns once committed. Asynchronous:
  // waits for the previous save, then returns after the snapshot.
  void save(const Metadata& meta);
  WriterState writer_state() const;
  // With every rank's writer_state() of this step: commits a finished
  // asynchronous save, or throws if a writer failed.
  void settle(const std::vector<int32_t>& states);
  // Finishes an outstanding asynchronous save (every rank calls it).
  void wait();
  // Fills every region this rank holds from the checkpoint at `path`,
  // whose metadata (read_metadata) is `meta`; moments absent from it are
  // left as they are.
  void load(const std::string& path, const Metadata& meta);
  // Bytes this rank writes per checkpoint and, when asynchronous, stages.
  uint64_t save_bytes() const;
  // A dry run's save: writes nothing, but an asynchronous one's staging
  // buffer enters the memory peaks.
  void dry_save();
  // Seconds training stood still for the last save (all of a synchronous
  // save; the snapshot of an asynchronous one).
  double last_stall_s() const { return stall_s_; }

 private:
  // The identity the folder records for this run (folder_owner.hpp).
  const std::string& run_id();
  void write_rank_files(const std::string& temp, const std::vector<std::span<const std::byte>>& data);
  std::vector<std::span<const std::byte>> snapshot();
  void commit_and_report(const std::vector<int32_t>& states);
  std::vector<int32_t> gather_states(int32_t mine);

  Device& device_;
  Collectives& world_;
  int32_t rank_;
  RankState state_;
  Options options_;
  // Asynchronous: the snapshot being written, allocated at the first save
  // and kept (first-touching a fresh buffer each save would double the stall).
  std::unique_ptr<float[]> staging_;
  size_t staging_floats_ = 0;
  std::thread writer_;
  std::atomic<int32_t> writer_state_{kIdle};
  std::exception_ptr writer_error_;
  bool pending_ = false;           // an asynchronous save awaits its commit
  Metadata pending_meta_;
  double stall_s_ = 0;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace mh::ckpt

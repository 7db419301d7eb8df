#pragma once
// Where a run's checkpoints live and how one becomes complete. Each trainer
// writes its own files, so a job whose machines do not share a filesystem
// still checkpoints:
//
//   <dir>/rank-<R>/epoch-<E>.pt     model, optimiser, embedding shard, RNG state
//   <dir>/rank-<R>/epoch-<E>.json   what was trained (graph, model shape,
//                                   trainer count) and the metrics so far
//   <dir>/rank-<R>/LATEST           "<E>": the last epoch every trainer saved
//
// Every file is written under a temporary name and renamed. An epoch is
// committed in two phases: every trainer writes its epoch files, the
// trainers synchronise, then each writes LATEST. So if any trainer's LATEST
// says E, every trainer has epoch E's files; resuming takes the largest
// LATEST of all trainers. The previous epoch's files are kept until the next
// commit. Torch-free.

#include <filesystem>
#include <string>

#include "common/status.h"

namespace dgld::trainer {

class CheckpointDir {
 public:
  CheckpointDir(std::filesystem::path root, int rank);

  // Creates the rank's directory; an error naming it when that fails or it
  // is not writable.
  Status prepare() const;
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path state_path(int epoch) const;
  std::filesystem::path meta_path(int epoch) const;
  // The committed epoch, -1 when there is none; corruption naming LATEST if
  // it does not hold an epoch number.
  Result<int> latest() const;
  // Writes LATEST = epoch and removes this rank's files of epochs before
  // epoch - 1.
  Status commit(int epoch) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace dgld::trainer

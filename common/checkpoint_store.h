#pragma once
// Checkpoints that can be trusted (docs/reliability.md), for every trainer:
// trainer-host's and the Python package's (dgld.distributed.Checkpointer,
// bound in dgld._C). Torch-free: the caller writes the payload (a torch
// archive, torch.save) to a temporary path and hands it over to be sealed.
//
//   <root>/rank-<R>/ckpt-<E>-<S>.pt     the payload of rank R at position (E, S)
//   <root>/rank-<R>/ckpt-<E>-<S>.json   the position, the payload's size and
//                                       CRC-32, and the caller's fields
//
// Position (E, S): the next step to run is step S of epoch E; the end of
// epoch E is (E + 1, 0). Sealing fsyncs the payload, records its size and
// CRC-32, renames it into place, then writes the JSON (temporary name,
// fsync, rename) and fsyncs the directory: a position whose JSON exists has a
// complete payload, and one whose payload does not match its JSON is refused
// with the path and the reason, never loaded.
//
// Across trainers a position counts when every rank holds it: each rank lists
// the positions it holds intact (valid), the ranks exchange their lists, and
// agreed_position picks the newest one all hold. After every rank sealed P
// (a barrier), prune(P) keeps P and the position before it, so a newest
// checkpoint found corrupt leaves an older complete one to resume from.
//
// Replicas (--checkpoint-replicas K, Checkpointer(replicas=K)): once P is
// committed, each rank's two files are copied to a trainer on each of the K
// machines after its own in ip_config order (replica_holders), which keeps
// them as
//
//   <root>/replica/rank-<R>/ckpt-<E>-<S>.{pt,json}   rank R's files, held on this machine
//
// (CheckpointStore::replica(root, R): the same checks and pruning). A copy
// counts only once it verifies there (adopt). On a restart every rank offers
// the positions it holds for every rank (its own and its replicas), the
// newest position every rank's files are held at *somewhere* is agreed on,
// and a rank without its own files there gets them from a holder (plan).
// The bytes travel over the trainers' collective channel (c10d Gloo
// send/recv in trainer-host, torch.distributed in Python); this file only
// decides who sends what to whom.
//
// A history journal (trainer-host's per-epoch figures, so a resumed run
// reports every epoch) lives beside each rank's files, appended to and never
// copied whole into a checkpoint:
//
//   <root>/rank-<R>/history.jsonl   (and <root>/replica/rank-<R>/history.jsonl)
//
// A checkpoint whose JSON has "history": {"bytes": B, "crc32": C} needs the
// journal's first B bytes to have CRC-32 C; bytes after B belong to later
// positions (or to a run that stopped before committing them, cut by the
// next append). A replica receives only the journal bytes its holder lacks.

#include <compare>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace dgld {

inline constexpr int kCheckpointExchange = 4;  // positions each rank offers when the ranks agree

struct CheckpointPosition {
  int64_t epoch = 0;
  int64_t step = 0;  // the next step to run in `epoch`
  auto operator<=>(const CheckpointPosition&) const = default;
  // One number per position for a collective (epoch << 32 | step), and back.
  int64_t encode() const { return (epoch << 32) | step; }
  static CheckpointPosition decode(int64_t v) { return {v >> 32, v & 0xffffffffLL}; }
  std::string str() const;  // "epoch E step S", or "the end of epoch E-1" when S is 0
};

// A length of a history journal and the CRC-32 of its bytes up to it.
struct HistoryMark {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
  bool operator==(const HistoryMark&) const = default;
  nlohmann::json to_json() const { return {{"bytes", bytes}, {"crc32", crc32}}; }
};

struct RefusedCheckpoint {
  std::filesystem::path path;
  std::string reason;
};

class CheckpointStore {
 public:
  CheckpointStore(std::filesystem::path root, int rank);

  // Creates the rank's directory; an error naming it when that fails or it is not writable.
  Status prepare() const;
  const std::filesystem::path& dir() const { return dir_; }
  int rank() const { return rank_; }
  // Rank `rank`'s replicas as this machine holds them: <root>/replica/rank-<rank>.
  static CheckpointStore replica(const std::filesystem::path& root, int rank);
  std::filesystem::path payload_path(CheckpointPosition p) const;
  std::filesystem::path meta_path(CheckpointPosition p) const;
  // Where the caller writes the payload of `p` before seal() (in the same directory).
  std::filesystem::path temp_payload_path(CheckpointPosition p) const;

  // Makes `written` (the complete payload, at temp_payload_path) the
  // checkpoint of `p` with `meta` (an object; "position", "rank" and
  // "payload" are set here). Any earlier files of `p` are replaced.
  Status seal(CheckpointPosition p, const std::filesystem::path& written, nlohmann::json meta) const;

  // The positions this rank holds intact, newest first; every one found
  // broken goes to `refused` (path and reason) when given.
  std::vector<CheckpointPosition> valid(std::vector<RefusedCheckpoint>* refused = nullptr) const;
  // The JSON of `p` after checking it and its payload (and that the journal
  // is at least as long as its history mark; valid() and read_history()
  // check the journal's bytes too); corruption naming the file and what is
  // wrong otherwise.
  Result<nlohmann::json> verify(CheckpointPosition p) const;

  // The history journal: `text` appended after the first `at.bytes` bytes
  // (the mark the caller last recorded; anything after it is cut), flushed
  // to disk; the new mark, for the next seal's "history".
  Result<HistoryMark> append_history(HistoryMark at, std::string_view text) const;
  // The journal's first mark.bytes bytes, read in 1 MiB pieces and handed
  // to `each` a line at a time (without its newline), then checked against
  // the mark: on an error the lines handed over must be dropped. Corruption
  // naming the journal when it is shorter, ends inside a line, or its CRC-32
  // differs. Without `each`, only the check (no copy of the journal in
  // memory).
  Status read_history(HistoryMark mark, const std::function<Status(std::string_view line)>& each = {}) const;
  std::filesystem::path history_path() const { return dir_ / "history.jsonl"; }
  // The mark in a checkpoint's JSON (`file`, for errors); nullopt when it has none.
  static Result<std::optional<HistoryMark>> history_mark(const nlohmann::json& meta, const std::filesystem::path& file);

  // The files of `p` as they are on disk (after verify): what a replica or a
  // rank without its own files receives. With a history mark in its JSON,
  // the journal's bytes after `history_from` (which the receiver holds; {}
  // when it holds nothing) up to the mark; read() falls back to the whole
  // journal when the receiver's mark is not a prefix of this one.
  struct Files {
    std::string payload, meta;
    std::string history;       // journal bytes from history_from.bytes on
    HistoryMark history_from;  // the receiver's journal before them
  };
  Result<Files> read(CheckpointPosition p, HistoryMark history_from = {}) const;
  // Makes `files` (another store's read(p) of this rank, received from
  // `from`) the checkpoint of `p` here: payload, then JSON (each to a
  // temporary name, fsynced, renamed), the journal's piece (checked against
  // the JSON's mark, appended at history_from), then the directory fsynced,
  // then verify(p). A copy that does not verify is removed and the error
  // names `from` and what is wrong; nothing of it is ever offered. The
  // journal mark this store now holds goes to `*mark` when given.
  Status adopt(CheckpointPosition p, const Files& files, const std::string& from, HistoryMark* mark = nullptr) const;

  // After every rank sealed `committed`: removes this rank's positions other
  // than `committed` and the newest one before it (later ones are leftovers
  // of a run that stopped before committing them), and stray temporary files.
  void prune(CheckpointPosition committed) const;

 private:
  std::vector<CheckpointPosition> on_disk() const;

  std::filesystem::path dir_;
  int rank_;
};

// The newest position every rank holds, from each rank's valid() list;
// nullopt when there is none (or no rank at all).
std::optional<CheckpointPosition> agreed_position(const std::vector<std::vector<CheckpointPosition>>& per_rank);

// Where rank `rank`'s replicas go: on each of the `k` machines after its own
// (ip_config order, wrapping; machines without trainers skipped), the
// trainer whose index among that machine's trainers is rank's index among
// its own machine's (modulo their count). Fewer than k when there are fewer
// other machines; none for k <= 0. machine_of_rank[r]: rank r's machine.
std::vector<int> replica_holders(const std::vector<int>& machine_of_rank, int rank, int k);
// The ranks whose replicas `rank` holds (the inverse of replica_holders).
std::vector<int> replicas_held_by(const std::vector<int>& machine_of_rank, int rank, int k);

// The exchange that agrees on a position, over a sum-allreduce: each rank
// fills its row of a zeroed [world, world * kCheckpointExchange] table with
// checkpoint_offer(held), held[r] being the positions it holds intact of
// rank r (its own valid() list at r == its rank, a replica's at the ranks
// it holds replicas of, empty elsewhere), and every rank reads the summed
// table with agreed_from_offers. The plan: the newest position whose files
// of every rank some rank holds, and for each rank the rank that has them
// (itself when it does, else the lowest holder); no position when no rank
// holds any; not_found naming each rank's newest anywhere when they hold
// some but none in common (`dir` names the directory, `dir_option` and
// `replicas_option` how the user sets it and its replicas, for the message).
struct CheckpointPlan {
  std::optional<CheckpointPosition> position;
  std::vector<int> source;  // by rank; empty without a position
  // The ranks that must receive their files from another, and from whom.
  std::vector<std::pair<int, int>> transfers() const;  // (to, from)
};
std::vector<int64_t> checkpoint_offer(const std::vector<std::vector<CheckpointPosition>>& held);
Result<CheckpointPlan> agreed_from_offers(std::span<const int64_t> table, int world, const std::string& dir,
                                          const std::string& dir_option,
                                          const std::string& replicas_option = "--checkpoint-replicas");

// dgl-launch follows a job's checkpoints through one line a trainer writes to
// stderr (docs/reliability.md): "dgld-progress {"event": ..., "epoch": E, "step": S}"
// with event "checkpoint" (every rank holds the position) or "resumed".
std::string progress_line(const std::string& event, CheckpointPosition p);
struct ProgressEvent {
  std::string event;
  CheckpointPosition position;
};
std::optional<ProgressEvent> parse_progress_line(const std::string& line);

}  // namespace dgld

#pragma once
// Files of a job on one machine: checksums that decide what must be copied,
// local copies (--local), and the identity of a job's processes and shared
// memory for the last sweep of a teardown.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/checksum.h"  // digest_file
#include "common/status.h"

namespace dgld::launch {

// Copies `from` to `to` (parents created, replaced by rename so a reader
// never sees half a file) unless `to` already has the same size and CRC-32.
// True when it copied.
Result<bool> copy_if_different(const std::filesystem::path& from, const std::filesystem::path& to);

// `path` (relative to the workspace, or absolute) on a machine whose workspace is `workspace`.
std::filesystem::path in_workspace(const std::filesystem::path& workspace, const std::string& path);

// Processes of this user whose environment holds DGLD_JOB_ID=<job_id> (and
// DGLD_MACHINE_ID=<machine> when machine >= 0), this process excluded.
std::vector<pid_t> find_job_processes(const std::string& job_id, int machine);

// The job's shared-memory segments of `machine`: /dev/shm/dgld.<job_id>.m<machine>.*
// (docs/shared-memory.md); every machine when machine < 0.
std::vector<std::string> job_shm_segments(const std::string& job_id, int machine);

}  // namespace dgld::launch

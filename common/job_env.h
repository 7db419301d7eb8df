#pragma once
// The environment dgl-launch gives every process it starts: the one contract
// between the launcher (launcher/launch/plan.cpp writes it) and the daemons and
// the Python package (which read it when the matching flag is absent). DGL's
// own names (DGL_*) keep DGL's meaning, so DGL's launch scripts and users'
// scripts that read them work unchanged; DGLD_* are dgld's additions.
// python/dgld/distributed/dist_context.py reads the same names.

#include <cstdlib>

namespace dgld::job_env {

inline constexpr const char* kIpConfig = "DGL_IP_CONFIG";      // ip_config.txt (path)
inline constexpr const char* kConfPath = "DGL_CONF_PATH";      // partition config JSON (path)
inline constexpr const char* kNumServer = "DGL_NUM_SERVER";    // graph-servers per machine
inline constexpr const char* kNumSampler = "DGL_NUM_SAMPLER";  // sampler-workers per trainer
inline constexpr const char* kNumClient = "DGL_NUM_CLIENT";    // trainers + samplers in the job
inline constexpr const char* kServerId = "DGL_SERVER_ID";      // a graph-server's global id
inline constexpr const char* kRole = "DGL_ROLE";               // "server" or "trainer"
inline constexpr const char* kGraphFormat = "DGL_GRAPH_FORMAT";  // DGL's --graph_format, passed through
inline constexpr const char* kJobId = "DGLD_JOB_ID";           // names the job's shared memory
inline constexpr const char* kMachineId = "DGLD_MACHINE_ID";   // this process's machine (and: started by dgl-launch)
inline constexpr const char* kTrainerRank = "DGLD_TRAINER_RANK";  // global trainer rank
inline constexpr const char* kNumTrainers = "DGLD_NUM_TRAINERS";  // trainers in the job
inline constexpr const char* kSecretFile = "DGLD_SECRET_FILE";    // the job's shared secret (mode 0600)
// How many times dgl-launch --max-restarts started the job again (absent or 0:
// the first start). Trainers with checkpoints resume from them when it is > 0.
inline constexpr const char* kRestart = "DGLD_RESTART";
inline int restart_count() {
  const char* v = std::getenv(kRestart);
  return v ? std::atoi(v) : 0;
}

}  // namespace dgld::job_env

#!/usr/bin/env bash
# Stand-in for trainer-host in dgl-launch's tests. Checks the environment the
# launcher promises (docs/operations.md), connects to every graph-server of
# every machine, then sleeps FAKE_SECONDS (default 0) and exits 0; rank
# FAKE_FAIL_RANK exits FAKE_FAIL_CODE after FAKE_FAIL_AFTER seconds instead
# (only while dgl-launch's DGLD_RESTART is below FAKE_FAIL_UNTIL_RESTART, when
# that is set). FAKE_PROGRESS=1: rank 0 reports a checkpoint of epoch
# DGLD_RESTART first, as trainer-host does (docs/reliability.md).
# Rank 0 writes --metrics-out FILE.
set -u
for v in DGL_ROLE DGL_IP_CONFIG DGL_CONF_PATH DGL_NUM_SERVER DGL_NUM_SAMPLER DGL_NUM_CLIENT \
         DGLD_MACHINE_ID DGLD_TRAINER_RANK DGLD_NUM_TRAINERS DGLD_JOB_ID OMP_NUM_THREADS OMP_WAIT_POLICY \
         MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK; do
  if [ -z "${!v:-}" ]; then echo "fake trainer: $v is not set" >&2; exit 3; fi
done
metrics=""
while [ $# -gt 0 ]; do
  case "$1" in
    --metrics-out) metrics="$2"; shift 2 ;;
    *) shift ;;
  esac
done
rank=$DGLD_TRAINER_RANK
m=0
while read -r host port _; do
  case "$host" in '' | '#'*) continue ;; esac
  port=${port:-30050}
  for ((j = 0; j < DGL_NUM_SERVER; j++)); do
    if ! (exec 3<>"/dev/tcp/$host/$((port + j))") 2>/dev/null; then
      echo "fake trainer $rank: server $j of machine $m ($host:$((port + j))) is unreachable" >&2
      exit 4
    fi
  done
  m=$((m + 1))
done <"$DGL_IP_CONFIG"
echo "fake trainer rank $rank of $DGLD_NUM_TRAINERS on machine $DGLD_MACHINE_ID: servers of $m machines reachable, OMP_NUM_THREADS=$OMP_NUM_THREADS OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
restart=${DGLD_RESTART:-0}
if [ "${FAKE_PROGRESS:-0}" = 1 ] && [ "$rank" = 0 ]; then
  echo "dgld-progress {\"event\": \"checkpoint\", \"epoch\": $restart, \"step\": 0}" >&2
fi
if [ "${FAKE_FAIL_RANK:--1}" = "$rank" ] && [ "$restart" -lt "${FAKE_FAIL_UNTIL_RESTART:-1000000}" ]; then
  sleep "${FAKE_FAIL_AFTER:-0}"
  echo "fake trainer $rank: failing on purpose"
  exit "${FAKE_FAIL_CODE:-3}"
fi
sleep "${FAKE_SECONDS:-0}"
if [ "$rank" = 0 ] && [ -n "$metrics" ]; then
  mkdir -p "$(dirname "$metrics")"
  printf '{"rank": 0, "num_trainers": %s, "job_id": "%s", "num_client": %s}\n' \
    "$DGLD_NUM_TRAINERS" "$DGLD_JOB_ID" "$DGL_NUM_CLIENT" >"$metrics"
fi
echo "fake trainer rank $rank done"

# shellcheck shell=bash
# DistDGL itself (DGL 1.1.3's examples/pytorch/graphsage/dist/train_dist.py)
# as 2 machines on this one host, 1 server and 1 trainer each, no sampler
# processes: what DGL's tools/launch.py starts, without ssh. Sourced by
# scripts/bench/epoch.sh (--distdgl), after lib/peaks.sh. Needs root.
#
# Why namespaces: DGL 1.1.3 cannot host two machines on one address. A
# client finds its machine id by matching the host's addresses against
# ip_config, so with 127.0.0.1 twice both trainers take machine 0; and a
# server puts its partition in /dev/shm under names made from the graph
# name only, so two servers on one /dev/shm overwrite each other. So each
# machine gets its own network namespace (eth0 with its own address) and
# mount namespace (a private tmpfs on /dev/shm), and the machines are
# linked by a bridge in a further network namespace: the host's network
# and /dev/shm are not touched. Each namespace lives as long as the
# `sleep` holding it (and the processes inside), so stopping those by PID
# removes everything.
#
#   distdgl_check DIR       we are root, the tools are there and DIR is a DGL
#                           checkout whose dgl imports; else says what's missing
#   distdgl_run DIR PART_CONFIG OUT TIMEOUT_S [train_dist.py flags...]
#                           one job; logs in OUT, and OUT/peaks: the peak RSS
#                           (KiB) "<server0> <server1> <trainer0> <trainer1>"
#   distdgl_metrics OUT JSON  rank 0's per-epoch figures of OUT's trainer
#                           logs as {"epochs": [{"time_s", ...}]}
#   distdgl_stop            stops what distdgl_run started (for a caller's
#                           cleanup trap, on error or Ctrl-C)

distdgl_python=/usr/bin/python3  # the interpreter DGL was built against
distdgl_subnet=10.213.0          # the machines' addresses, seen only inside the namespaces
distdgl_procs=()                 # this job's servers and trainers
distdgl_holders=()               # the namespaces' holders
distdgl_holder=""                # the one distdgl_new_holder started last

distdgl_err() { echo "distdgl: $*" >&2; }

distdgl_check() {
  local dir=$1 tool out
  if [[ $(id -u) != 0 ]]; then
    distdgl_err "--distdgl needs root (it runs each DistDGL machine in its own network and mount namespace)"
    return 1
  fi
  for tool in unshare nsenter ip "$distdgl_python"; do
    command -v "$tool" >/dev/null || { distdgl_err "$tool not found"; return 1; }
  done
  [[ -f "$dir/examples/pytorch/graphsage/dist/train_dist.py" ]] || {
    distdgl_err "$dir/examples/pytorch/graphsage/dist/train_dist.py missing (not a DGL checkout?)"; return 1; }
  [[ -d "$dir/python/dgl" ]] || { distdgl_err "$dir/python/dgl missing (not a DGL checkout?)"; return 1; }
  if ! out=$(DGLBACKEND=pytorch PYTHONPATH="$dir/python" "$distdgl_python" -c \
               'import dgl, dgl.distributed; print(dgl.__version__)' 2>&1); then
    distdgl_err "cannot import dgl from $dir/python with $distdgl_python (is DGL's C++ library built in $dir/build?):"
    echo "$out" | tail -3 >&2
    return 1
  fi
  out=$(echo "$out" | tail -1)
  # The runner reproduces DGL 1.1.3's launch protocol (its environment variables).
  [[ $out == 1.1.* ]] || distdgl_err "warning: DGL $out, not 1.1.x: the launch protocol may differ"
  echo "DGL $out from $dir"
}

# Starts `sleep infinity` in new namespaces ($@: unshare's flags, then an
# optional "-- sh -c ..." set-up that ends by exec'ing sleep) and waits
# until the set-up is done (the holder has become `sleep`); its PID is then
# in $distdgl_holder.
distdgl_new_holder() {
  local t
  unshare "$@" > /dev/null 2>&1 &
  distdgl_holder=$!
  distdgl_holders+=("$distdgl_holder")
  for ((t = 0; t < 100; t++)); do
    [[ $(cat "/proc/$distdgl_holder/comm" 2>/dev/null) == sleep ]] && return 0
    kill -0 "$distdgl_holder" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# Runs "$@" (a command with its environment, by `env`) inside machine $1's
# namespaces; with `&`, $! is then the PID of the command itself.
distdgl_in() {
  local holder=$1; shift
  exec nsenter -t "$holder" -n -m -- env "$@"
}

# Sends TERM to the given PIDs, KILL to those left after 5 s, and reaps them.
distdgl_kill() {
  local p t alive
  [[ $# -gt 0 ]] || return 0
  kill -TERM "$@" 2>/dev/null || true
  for ((t = 0; t < 50; t++)); do
    alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

distdgl_stop() {
  # The processes first: a namespace goes when its holder and everything in
  # it have. (Quiet: bash reports each job a signal ended, and DGL's aborts
  # on TERM.)
  distdgl_kill "${distdgl_procs[@]}" 2>/dev/null
  distdgl_kill "${distdgl_holders[@]}" 2>/dev/null
  distdgl_procs=(); distdgl_holders=()
}

distdgl_run() {
  local dir=$1 config=$2 out=$3 timeout_s=$4; shift 4
  local script="$dir/examples/pytorch/graphsage/dist/train_dist.py"
  config=$(realpath "$config"); mkdir -p "$out"; out=$(realpath "$out")
  local port=30050 master_port=29500 switch m addr
  local machines=() servers=() trainers=()

  # The network: machine m is $distdgl_subnet.(m+1) on its eth0, the peer of
  # a port of the bridge br0 in the switch namespace.
  distdgl_new_holder --net sleep infinity || {
    distdgl_err "unshare --net failed (root with CAP_SYS_ADMIN needed)"; distdgl_stop; return 1; }
  switch=$distdgl_holder
  if ! { nsenter -t "$switch" -n ip link add br0 type bridge && nsenter -t "$switch" -n ip link set br0 up; }; then
    distdgl_err "cannot make a bridge in a network namespace"; distdgl_stop; return 1
  fi
  : > "$out/ip_config.txt"
  for m in 0 1; do
    distdgl_new_holder --net --mount --propagation private -- \
        sh -c 'mount -t tmpfs tmpfs /dev/shm && exec sleep infinity' || {
      distdgl_err "cannot make machine $m's namespaces (unshare --net --mount, tmpfs on /dev/shm)"; distdgl_stop; return 1; }
    machines[m]=$distdgl_holder
    addr=$distdgl_subnet.$((m + 1))
    if ! { nsenter -t "$switch" -n ip link add "vs$m" type veth peer name eth0 netns "${machines[m]}" &&
           nsenter -t "$switch" -n ip link set "vs$m" master br0 up &&
           nsenter -t "${machines[m]}" -n ip link set lo up &&
           nsenter -t "${machines[m]}" -n ip addr add "$addr/24" dev eth0 &&
           nsenter -t "${machines[m]}" -n ip link set eth0 up; }; then
      distdgl_err "cannot link machine $m's namespace to the bridge (veth)"; distdgl_stop; return 1
    fi
    echo "$addr $port" >> "$out/ip_config.txt"
  done

  # What tools/launch.py sets, for 2 machines x (1 server + 1 trainer), no
  # samplers; OMP_NUM_THREADS=1 is launch.py's default for 1 trainer on a
  # 2-core machine. Servers and trainers get the same command line.
  local args=("$script" "$@" --ip_config "$out/ip_config.txt" --part_config "$config")
  local common=(DGLBACKEND=pytorch "PYTHONPATH=$dir/python" OMP_NUM_THREADS=1
                GLOO_SOCKET_IFNAME=eth0 TP_SOCKET_IFNAME=eth0 DGL_NUM_SAMPLER=0 DGL_NUM_CLIENT=2
                DGL_NUM_SERVER=1 "DGL_CONF_PATH=$config" "DGL_IP_CONFIG=$out/ip_config.txt"
                DGL_GRAPH_FORMAT=csc)
  for m in 0 1; do
    distdgl_in "${machines[m]}" "${common[@]}" DGL_ROLE=server DGL_KEEP_ALIVE=0 "DGL_SERVER_ID=$m" \
      "$distdgl_python" "${args[@]}" > "$out/server$m.log" 2>&1 &
    servers+=("$!"); distdgl_procs+=("$!")
  done
  # The "env" launcher: torch.distributed's variables set directly, --local_rank passed.
  for m in 0 1; do
    distdgl_in "${machines[m]}" "${common[@]}" DGL_DIST_MODE=distributed DGL_ROLE=client DGL_GROUP_ID=0 \
      "MASTER_ADDR=$distdgl_subnet.1" "MASTER_PORT=$master_port" "RANK=$m" WORLD_SIZE=2 LOCAL_RANK=0 \
      "$distdgl_python" "${args[@]}" --local_rank 0 > "$out/trainer$m.log" 2>&1 &
    trainers+=("$!"); distdgl_procs+=("$!")
  done

  # Wait for the trainers, polling everyone's peak memory; fail on the first
  # trainer that fails, a server that fails under them, or the deadline.
  local procs=("${servers[@]}" "${trainers[@]}") peaks=(0 0 0 0) exited=() i v s running failed=""
  local deadline=$((SECONDS + timeout_s))
  while :; do
    for i in "${!procs[@]}"; do
      v=$(peak_kib "${procs[i]}")
      (( v > peaks[i] )) && peaks[i]=$v
    done
    running=0
    for i in "${!procs[@]}"; do
      [[ -n ${exited[i]:-} ]] && continue
      if kill -0 "${procs[i]}" 2>/dev/null; then
        (( i >= 2 )) && running=1
        continue
      fi
      s=0; wait "${procs[i]}" || s=$?
      exited[i]=$s
      [[ $s == 0 ]] && continue
      if (( i >= 2 )); then failed="trainer $((i - 2)) exited with status $s"
      else failed="server $i exited with status $s"; fi
    done
    [[ -n $failed || $running == 0 ]] && break
    (( SECONDS < deadline )) || { failed="no result after ${timeout_s} s (a hang?)"; break; }
    sleep "${PEAK_POLL_S:-0.2}"
  done
  # The servers shut down by themselves once both trainers have said
  # goodbye; those still up after 20 s are stopped below all the same.
  if [[ -z $failed ]]; then
    for ((i = 0; i < 100; i++)); do
      kill -0 "${servers[0]}" 2>/dev/null || kill -0 "${servers[1]}" 2>/dev/null || break
      sleep 0.2
    done
  fi
  echo "${peaks[*]}" > "$out/peaks"
  distdgl_stop
  if [[ -n $failed ]]; then
    distdgl_err "DistDGL's job failed: $failed; the logs' last lines ($out):"
    tail -n 8 "$out"/server*.log "$out"/trainer*.log >&2
    return 1
  fi
}

distdgl_metrics() {
  "$distdgl_python" - "$@" <<'PY'
import glob, json, os, re, sys
out, dest = sys.argv[1], sys.argv[2]
# train_dist.py prints, per epoch and trainer: "Part <rank>, Epoch Time(s): X,
# sample+data_copy: S, forward: F, backward: B, update: U, ..."
line = re.compile(r"Part 0, Epoch Time\(s\): ([\d.]+), sample\+data_copy: ([\d.]+), "
                  r"forward: ([\d.]+), backward: ([\d.]+), update: ([\d.]+)")
acc = re.compile(r"Part 0, Val Acc ([\d.]+), Test Acc ([\d.]+)")
epochs, metrics = [], {}
for path in sorted(glob.glob(os.path.join(out, "trainer*.log"))):
    for text in open(path, errors="replace"):
        if m := line.search(text):
            t, s, f, b, u = map(float, m.groups())
            epochs.append({"epoch": len(epochs), "time_s": t, "sample_s": s, "compute_s": f + b + u,
                           "forward_s": f, "backward_s": b, "update_s": u})
        elif m := acc.search(text):
            metrics["val_acc"], metrics["test_acc"] = map(float, m.groups())
if not epochs:
    sys.exit(f"distdgl: no 'Part 0, Epoch Time(s)' lines in {out}/trainer*.log")
metrics["epochs"] = epochs
json.dump(metrics, open(dest, "w"), indent=2)
PY
}

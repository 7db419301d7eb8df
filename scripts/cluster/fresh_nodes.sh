#!/usr/bin/env bash
# Fresh Debian 12 nodes with the dgld packages installed by apt, as on a new
# cluster (docs/cluster-emulator.md, "Fresh nodes"). Root only.
#
#   scripts/cluster/fresh_nodes.sh --debs DIR [--nodes 3] [--graph-nodes 100000] [--keep]
#
# 1. The image: scripts/cluster/node_image.sh (debootstrap bookworm minbase +
#    systemd, systemd-sysv, dbus, openssh-server, iproute2; cached).
# 2. The packages' Debian dependencies are fetched once into a cache
#    (apt-get install --download-only in a throw-away copy of the image, on
#    this machine's network): the nodes themselves reach nothing but each
#    other, so their apt installs from that cache, offline.
# 3. N nodes: the emulator's machines without their sshd (cluster_emu.py up
#    --no-sshd: a network namespace each on dgld-switch's links, 10.214.0.1x),
#    each booting the image under systemd-nspawn (systemd as PID 1, its own
#    sshd, host keys made at first boot) on an overlay of its own over the
#    image, thrown away at the end (not --ephemeral: a reboot must keep what
#    was installed).
# 4. On every node: apt-get install ./dgld_*.deb ./python3-dgld_*.deb. Then:
#    the demo job by dgl-launch from node 0 over ssh to all nodes (test
#    accuracy printed); graph-servers as units (dgl-launch --write-server-env,
#    systemctl enable --now dgld-graph-server@...) serving two jobs with
#    --external-servers; systemctl kill -s KILL of a server -> restarted, the
#    next job runs; a node rebooted -> its enabled server answers, a job runs;
#    a node with another protocol version is refused by dgl-launch;
#    systemctl stop dgld.target -> no process, no shared memory; apt purge ->
#    nothing left. Each step's time is printed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
NODES=3
GRAPH_NODES=100000
DEBS=""
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --graph-nodes) GRAPH_NODES=$2; shift 2 ;;
    --debs) DEBS=$(realpath "$2"); shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "fresh_nodes: unknown argument '$1' (expected --debs DIR, --nodes N, --graph-nodes N, --keep)" >&2; exit 2 ;;
  esac
done
die() { echo "fresh_nodes: FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "root is needed (namespaces, mounts, systemd-nspawn)"
[ -n "$DEBS" ] || die "--debs DIR is required (the output directory of scripts/package.sh)"
deb_dgld=$(ls "$DEBS"/dgld_*.deb 2>/dev/null | head -n1)
deb_py=$(ls "$DEBS"/python3-dgld_*.deb 2>/dev/null | head -n1)
[ -n "$deb_dgld" ] && [ -n "$deb_py" ] || die "no dgld_*.deb and python3-dgld_*.deb in $DEBS (scripts/package.sh)"
[ "$NODES" -ge 2 ] && [ "$NODES" -le 16 ] || die "--nodes $NODES: expected 2 to 16"
command -v systemd-nspawn >/dev/null || die "systemd-nspawn is missing (apt-get install systemd-container)"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || die "the kernel has no overlay file system"

NAME=fresh
RUN=/var/tmp/dgld-fresh-nodes
CACHE=${DGLD_NODE_CACHE:-/var/cache/dgld-nodes}
EMU=(python3 "$repo/scripts/cluster_emu.py")
T0=$(date +%s)
declare -a TIMES=()
phase_start=$T0
phase() {  # phase NAME: the time since the last phase, under that name
  local now; now=$(date +%s)
  TIMES+=("$(printf '%-58s %4d s' "$1" $((now - phase_start)))")
  echo "fresh_nodes: done: $1 ($((now - phase_start)) s)" >&2
  phase_start=$now
}
addr() { echo "10.214.0.$((10 + $1))"; }

# ------------------------------------------------------------------ nodes
leader() {  # the node's systemd (PID 1 inside), seen from here
  local ns="dgldemu-$NAME-h$1" p pp
  for p in $(ip netns pids "$ns" 2>/dev/null); do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = systemd ] || continue
    pp=$(awk '/^PPid:/ {print $2}' /proc/"$p"/status 2>/dev/null) || continue
    [ "$(cat /proc/"$pp"/comm 2>/dev/null)" = systemd-nspawn ] && { echo "$p"; return 0; }
  done
  return 1
}
on() {  # on I CMD: a shell command on node I, as root there
  local i=$1 l; shift
  l=$(leader "$i") || die "node $i is not running (no systemd under systemd-nspawn in its namespace)"
  nsenter -t "$l" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive sh -c "$*"
}
wait_until() {  # wait_until SECONDS WHAT CMD...: CMD until it succeeds
  local t=$1 what=$2 end; shift 2
  end=$(( $(date +%s) + t ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || die "timed out after $t s waiting for $what"
    sleep 1
  done
}
booted() { on "$1" 'systemctl is-system-running | grep -qE "^(running|degraded)$"'; }

boot() {  # boot I: node I under systemd-nspawn, booted again whenever it reboots (exit 133)
  local i=$1 d="$RUN/node$1"
  ( while :; do
      rc=0
      systemd-nspawn -D "$d/root" -b --register=no --keep-unit --machine="node$i" --hostname="node$i" \
        --network-namespace-path="/run/netns/dgldemu-$NAME-h$i" --console=passive --link-journal=no \
        --bind-ro="$DEBS:/mnt/debs" || rc=$?
      echo "fresh_nodes: node$i's systemd-nspawn exited $rc" >>"$d/console.log"
      [ "$rc" -eq 133 ] && [ ! -e "$RUN/stop" ] || break
    done ) >>"$d/console.log" 2>&1 &
  echo $! >"$d/wrapper.pid"
}

cleanup() {
  local rc=$?
  if [ "$KEEP" = 1 ]; then
    echo "fresh_nodes: --keep: nodes left running; remove with: touch $RUN/stop; kill the systemd-nspawn of each;" \
      "umount $RUN/node*/root; ${EMU[*]} down --name $NAME" >&2
    exit $rc
  fi
  touch "$RUN/stop" 2>/dev/null || true
  for d in "$RUN"/node*; do
    [ -d "$d" ] || continue
    local i=${d##*node}
    l=$(leader "$i" 2>/dev/null) && kill -RTMIN+4 "$l" 2>/dev/null || true   # systemd: poweroff
  done
  for d in "$RUN"/node*; do
    [ -f "$d/wrapper.pid" ] || continue
    w=$(cat "$d/wrapper.pid")
    for _ in $(seq 1 60); do kill -0 "$w" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$w" 2>/dev/null && { echo "fresh_nodes: ${d##*/} did not power off in 30 s" >&2; }
    mountpoint -q "$d/root" && umount -l "$d/root"
  done
  "${EMU[@]}" down --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$RUN"
  exit $rc
}

# ------------------------------------------------------------------ 1-2: image and dependencies
IMAGE=$(bash "$repo/scripts/cluster/node_image.sh")
phase "image (debootstrap bookworm, cached in $CACHE)"
key=$(cat "$deb_dgld" "$deb_py" | sha256sum | cut -c1-12)
if [ ! -f "$CACHE/deps-$key.ready" ]; then
  rm -rf "$CACHE/archives" "$CACHE/lists" "$CACHE"/deps-*.ready
  mkdir -p "$CACHE/archives/partial" "$CACHE/lists"
  systemd-nspawn -q -D "$IMAGE" --ephemeral --register=no --keep-unit \
    --bind="$CACHE/archives:/var/cache/apt/archives" --bind="$CACHE/lists:/var/lib/apt/lists" \
    --bind-ro="$DEBS:/mnt/debs" -- /bin/sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --download-only /mnt/debs/$(basename "$deb_dgld") /mnt/debs/$(basename "$deb_py")" \
    >"$CACHE/deps.log" 2>&1 || die "fetching the packages' dependencies failed (is Debian's mirror reachable?):
$(tail -n 8 "$CACHE/deps.log")"
  touch "$CACHE/deps-$key.ready"
fi
phase "the packages' Debian dependencies ($(ls "$CACHE"/archives/*.deb | wc -l) .deb, cached)"

# ------------------------------------------------------------------ 3: nodes
[ ! -e "$RUN" ] || die "$RUN exists: an earlier run is up or crashed (its cleanup: see --keep's message)"
"${EMU[@]}" down --name "$NAME" >/dev/null 2>&1 || true
mkdir -p "$RUN"
trap cleanup EXIT
trap 'exit 130' INT TERM
"${EMU[@]}" up --machines "$NODES" --name "$NAME" --preset 10g --no-sshd >/dev/null
ssh-keygen -q -t ed25519 -N "" -C dgld-fresh-nodes -f "$RUN/id"
for i in $(seq 0 $((NODES - 1))); do
  d="$RUN/node$i"
  mkdir -p "$d/upper/var/cache/apt" "$d/work" "$d/root"
  cp -al "$CACHE/archives" "$d/upper/var/cache/apt/"   # hard links: each node's apt has its own cache
  mount -t overlay overlay -o "lowerdir=$IMAGE,upperdir=$d/upper,workdir=$d/work" "$d/root"
  install -d -m 700 "$d/root/root/.ssh"
  install -m 600 "$RUN/id.pub" "$d/root/root/.ssh/authorized_keys"
  cp -a "$CACHE/lists/." "$d/root/var/lib/apt/lists/"
  boot "$i"
done
for i in $(seq 0 $((NODES - 1))); do wait_until 120 "node $i to boot (systemd)" booted "$i"; done
install -m 600 "$RUN/id" "$RUN/node0/root/root/.ssh/id_ed25519"
for i in $(seq 0 $((NODES - 1))); do
  wait_until 60 "node $i's ssh host key" test -s "$RUN/node$i/root/etc/ssh/ssh_host_ed25519_key.pub"
  echo "$(addr "$i") $(cut -d' ' -f1,2 "$RUN/node$i/root/etc/ssh/ssh_host_ed25519_key.pub")"
done >"$RUN/node0/root/root/.ssh/known_hosts"
phase "$NODES nodes booted (systemd-nspawn, systemd as PID 1, own sshd)"

# ------------------------------------------------------------------ 4: install
for i in $(seq 0 $((NODES - 1))); do
  on "$i" "apt-get install -y -q /mnt/debs/$(basename "$deb_dgld") /mnt/debs/$(basename "$deb_py")" \
    >"$RUN/install-$i.log" 2>&1 &
  echo $! >"$RUN/install-$i.pid"
done
for i in $(seq 0 $((NODES - 1))); do
  wait "$(cat "$RUN/install-$i.pid")" || die "apt-get install on node $i: $(tail -n 8 "$RUN/install-$i.log")"
done
version=$(on 0 'graph-server --version') || die "graph-server --version on node 0 failed: is it in the dgld package?"
pyver=$(on 0 'cd / && OMP_NUM_THREADS=1 python3 -c "import dgld; print(dgld.__version__, dgld.protocol_version)"')
echo "fresh_nodes: installed: $version; python3 -c 'import dgld': $pyver" >&2
for i in $(seq 0 $((NODES - 1))); do
  on "$i" "getent passwd dgld >/dev/null" || die "after install, node $i has no user dgld"
  on "$i" "test -d /etc/dgld" || die "after install, node $i has no /etc/dgld"
  on "$i" "systemctl is-enabled -q dgld.target" || die "after install, dgld.target is not enabled on node $i"
done
phase "apt-get install ./dgld_*.deb ./python3-dgld_*.deb on $NODES nodes"

# ------------------------------------------------------------------ the demo job over ssh
ssh_flags="--identity-file /root/.ssh/id_ed25519 --ssh-option StrictHostKeyChecking=yes"
mkdir -p "$RUN/node0/root/root/job"
for i in $(seq 0 $((NODES - 1))); do echo "$(addr "$i") 30050"; done >"$RUN/node0/root/root/job/ip_config.txt"
on 0 "cd /root/job && dgl-partition --generate sbm:nodes=$GRAPH_NODES,avg_degree=20,classes=47,feat_dim=100,seed=1 \
    --num-parts $NODES --graph-name sbm --output parts" >"$RUN/partition.log" 2>&1 ||
  die "dgl-partition on node 0: $(tail -n 5 "$RUN/partition.log")"
phase "dgl-partition: $GRAPH_NODES-node SBM into $NODES parts (node 0)"
launch() {  # launch JOB-ARGS...: dgl-launch from node 0 over ssh; its output in $RUN/launch-<n>.log
  on 0 "cd /root/job && dgl-launch --workspace /var/lib/dgld/units --ip-config ip_config.txt \
    --part-config parts/sbm.json --num-servers 1 --num-trainers 1 --num-samplers 1 $ssh_flags $*"
}
launch --job-id demo -- trainer-host --num-epochs 10 --eval-every 5 --log-every 0 --lr 0.01 \
  --metrics-out metrics.json >"$RUN/launch-demo.log" 2>&1 || die "the demo job: $(tail -n 15 "$RUN/launch-demo.log")"
acc=$(on 0 'python3 -c "import json; m = json.load(open(\"/root/job/metrics.json\")); print(round(m[\"test_acc\"], 4))"')
echo "fresh_nodes: demo job: test accuracy $acc (the same job on one machine:" \
  "scripts/demo.sh --num-parts $NODES --num-samplers 1; 0.8136 for 3 parts on 2026-12-07)" >&2
phase "demo job: dgl-launch over ssh to $NODES nodes, 10 epochs (test accuracy $acc)"

# ------------------------------------------------------------------ graph-servers as units
# The data stays from the demo job (same workspace); the servers run as dgld.
on 0 "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >/etc/dgld/units.secret && chown dgld: /etc/dgld/units.secret \
  && chmod 600 /etc/dgld/units.secret"
launch --job-id units --secret-file /etc/dgld/units.secret --write-server-env env >"$RUN/env.log" 2>&1 ||
  die "--write-server-env: $(tail -n 5 "$RUN/env.log")"
for i in $(seq 0 $((NODES - 1))); do
  if [ "$i" != 0 ]; then
    on 0 "scp -q -o BatchMode=yes -i /root/.ssh/id_ed25519 /etc/dgld/units.secret /root/job/env/machine-$i/units-$i.env root@$(addr "$i"):/etc/dgld/"
  else
    on 0 "cp /root/job/env/machine-0/units-0.env /etc/dgld/"
  fi
  on "$i" "chown dgld: /etc/dgld/units.secret && chown -R dgld: /var/lib/dgld/units && \
    systemctl enable --now dgld-graph-server@units-$i 2>&1"
done
listening() { on "$1" "ss -ltn | grep -q '$(addr "$1"):30050 '"; }
for i in $(seq 0 $((NODES - 1))); do wait_until 120 "dgld-graph-server@units-$i to listen" listening "$i"; done
phase "graph-servers as units: --write-server-env, systemctl enable --now"
job() {  # job NAME: trainers only, against the units
  launch --job-id units --secret-file /etc/dgld/units.secret --external-servers -- trainer-host --num-epochs 2 \
    --eval-every 0 --log-every 0 --lr 0.01 >"$RUN/launch-$1.log" 2>&1 || die "job $1: $(tail -n 15 "$RUN/launch-$1.log")"
}
job external-1
phase "job 1 with --external-servers (2 epochs)"
job external-2
phase "job 2 with --external-servers, the same servers"

k=$((NODES - 2))
pid_before=$(on "$k" "systemctl show -p MainPID --value dgld-graph-server@units-$k")
on "$k" "systemctl kill -s KILL dgld-graph-server@units-$k"
restarted() { [ "$(on "$k" "systemctl show -p MainPID --value dgld-graph-server@units-$k")" != "$pid_before" ] &&
  on "$k" "systemctl is-active -q dgld-graph-server@units-$k" && listening "$k"; }
wait_until 60 "systemd to restart dgld-graph-server@units-$k after SIGKILL" restarted
job after-kill
phase "systemctl kill -s KILL on node $k: restarted by systemd, the next job runs"

r=$((NODES - 1))
on "$r" "systemctl reboot" || true
sleep 3
wait_until 180 "node $r to boot again" booted "$r"
wait_until 120 "node $r's enabled graph-server after the reboot" listening "$r"
job after-reboot
phase "node $r rebooted (systemctl reboot): its enabled server answers, a job runs"

# ------------------------------------------------------------------ stop
left_after_stop() { on "$1" 'for c in /proc/[0-9]*/comm; do grep -qxE "graph-server|trainer-host|sampler-worker" $c 2>/dev/null && echo "process ${c%/comm}"; done; ls /dev/shm | grep "^dgld\." || true'; }
for i in $(seq 0 $((NODES - 1))); do
  on "$i" "systemctl stop dgld.target"
  left=$(left_after_stop "$i")
  [ -z "$left" ] || die "after systemctl stop dgld.target, node $i still has: $left"
done
phase "systemctl stop dgld.target: no process, no shared memory left"
# ------------------------------------------------------------------ another protocol version is refused
# (with the units stopped: the job's ports are free, so the version is what stops it)
on 1 "mv /usr/bin/graph-server /usr/bin/graph-server.real && printf '#!/bin/sh\necho \"graph-server 0.0.1 (protocol 1)\"\n' \
  >/usr/bin/graph-server && chmod 755 /usr/bin/graph-server"
rc=0
launch --job-id mismatch -- trainer-host --num-epochs 1 >"$RUN/launch-mismatch.log" 2>&1 || rc=$?
on 1 "mv /usr/bin/graph-server.real /usr/bin/graph-server"
[ "$rc" = 2 ] || die "a node with another version: dgl-launch exited $rc, expected 2 (nothing started): $(tail -n 5 "$RUN/launch-mismatch.log")"
grep -q "0.0.1 (protocol 1)" "$RUN/launch-mismatch.log" && grep -qF "$(echo "$version" | cut -d' ' -f2-)" \
  "$RUN/launch-mismatch.log" || die "the refusal does not name both versions: $(tail -n 5 "$RUN/launch-mismatch.log")"
echo "fresh_nodes: refused: $(grep -m1 -i "0.0.1" "$RUN/launch-mismatch.log")" >&2
phase "a node reporting another protocol version: refused, nothing started"

# ------------------------------------------------------------------ purge
for i in $(seq 0 $((NODES - 1))); do
  on "$i" "systemctl start dgld.target"   # running servers and their segments, for purge to remove
done
for i in $(seq 0 $((NODES - 1))); do wait_until 120 "node $i's server to start again" listening "$i"; done
# Node 0's server SIGKILLed just before: its segments stay (a killed server cannot unlink them), for purge.
on 0 "systemctl kill -s KILL dgld-graph-server@units-0"
stale=$(on 0 'ls /dev/shm | grep -c "^dgld\." || true')
echo "fresh_nodes: node 0 before purge: graph-server SIGKILLed, $stale segment(s) in /dev/shm" >&2
for i in $(seq 0 $((NODES - 1))); do
  on "$i" "apt-get purge -y -q dgld python3-dgld" >"$RUN/purge-$i.log" 2>&1 || die "apt-get purge on node $i: $(tail -n 5 "$RUN/purge-$i.log")"
  left=$(on "$i" 'getent passwd dgld; getent group dgld; ls -d /etc/dgld /var/lib/dgld /usr/share/dgld \
    /usr/lib/python3/dist-packages/dgld /lib/systemd/system/dgld* /etc/systemd/system/*dgld* \
    /etc/systemd/system/*/dgld* /usr/lib/sysusers.d/dgld.conf /usr/lib/tmpfiles.d/dgld.conf 2>/dev/null; \
    ls /dev/shm | grep "^dgld\." ; dpkg -l dgld python3-dgld 2>/dev/null | grep "^[a-z][a-z] "' | grep -v "^un " || true)
  left+=$(left_after_stop "$i")
  [ -z "$left" ] || die "apt-get purge left on node $i: $left"
done
phase "apt-get purge dgld python3-dgld: nothing left (user, group, /etc/dgld, /var/lib/dgld, units, processes, shm)"

echo "fresh_nodes: all steps passed on $NODES fresh nodes ($version); times:"
printf '  %s\n' "${TIMES[@]}"
echo "  total: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# The fresh-node image of scripts/cluster/fresh_nodes.sh: a Debian 12 (bookworm)
# root made by debootstrap from Debian's own packages (minbase, plus systemd,
# systemd-sysv, dbus, openssh-server, iproute2), built once and cached; rebuilt
# when its package list changes or it is older than DGLD_NODE_IMAGE_MAX_DAYS.
# Prints the image's directory. Root only.
#   scripts/cluster/node_image.sh [--rebuild]
set -euo pipefail

CACHE=${DGLD_NODE_CACHE:-/var/cache/dgld-nodes}
MIRROR=${DGLD_NODE_MIRROR:-http://deb.debian.org/debian}
MAX_DAYS=${DGLD_NODE_IMAGE_MAX_DAYS:-30}
INCLUDE=systemd,systemd-sysv,dbus,openssh-server,iproute2,ca-certificates
# Bump when what is done to the image below changes: a new key, a new image.
RECIPE=2
key=$(printf '%s\n' "bookworm" "$INCLUDE" "$MIRROR" "$RECIPE" | sha256sum | cut -c1-12)
IMAGE="$CACHE/bookworm-$key"

die() { echo "node_image: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "root is needed (debootstrap, chroot)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"

if [ "${1:-}" = "--rebuild" ]; then rm -rf "$IMAGE"; fi
if [ -f "$IMAGE/.dgld-image-ready" ]; then
  age_days=$(( ($(date +%s) - $(stat -c %Y "$IMAGE/.dgld-image-ready")) / 86400 ))
  if [ "$age_days" -lt "$MAX_DAYS" ]; then echo "$IMAGE"; exit 0; fi
  echo "node_image: $IMAGE is $age_days days old (limit $MAX_DAYS): rebuilding" >&2
fi

mkdir -p "$CACHE"
# Images of other recipes are stale: remove them (never the current one's users:
# nodes boot --ephemeral copies, so removing an image under them is safe).
for old in "$CACHE"/bookworm-*; do
  [ -e "$old" ] && [ "$old" != "$IMAGE" ] && [ "$old" != "$IMAGE.tmp" ] && rm -rf "$old"
done
tmp="$IMAGE.tmp"
rm -rf "$tmp"
start=$(date +%s)
echo "node_image: debootstrap bookworm into $tmp (minbase + $INCLUDE) ..." >&2
debootstrap --variant=minbase --include="$INCLUDE" bookworm "$tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
  die "debootstrap failed (is $MIRROR reachable?): last lines of $CACHE/debootstrap.log:
$(tail -n 5 "$CACHE/debootstrap.log")"

# A node is a plain Debian 12 machine: apt sources, no host name baked in, a
# DHCP-free network (fresh_nodes.sh gives each node its address), sshd on.
echo "deb $MIRROR bookworm main" >"$tmp/etc/apt/sources.list"
rm -f "$tmp/etc/hostname" "$tmp/etc/machine-id" && : >"$tmp/etc/machine-id"
rm -f "$tmp"/etc/ssh/ssh_host_*   # each node makes its own at first boot (below)
cat >"$tmp/etc/systemd/system/node-ssh-hostkeys.service" <<'UNIT'
[Unit]
Description=ssh host keys of this node
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key
[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A
[Install]
WantedBy=multi-user.target
UNIT
chroot "$tmp" systemctl enable node-ssh-hostkeys.service ssh.service >/dev/null 2>&1
chroot "$tmp" systemctl mask systemd-networkd-wait-online.service >/dev/null 2>&1 || true
chroot "$tmp" apt-get clean
touch "$tmp/.dgld-image-ready"
mv "$tmp" "$IMAGE"
echo "node_image: built $IMAGE in $(( $(date +%s) - start )) s ($(du -sh "$IMAGE" | cut -f1))" >&2
echo "$IMAGE"

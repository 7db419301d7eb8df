#!/usr/bin/env bash
# Builds the Debian packages dgld and python3-dgld with Debian's own tooling
# (dpkg-buildpackage: debhelper's meson build system, dh_python3,
# dpkg-shlibdeps) from a clean clone of this repository's HEAD, runs lintian on
# them, and prints the directory that holds them (docs/operations.md,
# "Installing"). Root or not; build dependencies missing here are installed
# with apt-get build-dep when run as root.
#
#   scripts/package.sh [--out DIR] [--work DIR] [--rev REV] [--no-lintian]
#
#   --out DIR    where the .deb, .changes, .buildinfo and lintian.txt go
#                (default: /tmp/dgld-packages)
#   --work DIR   where the clone is built (default: a new directory under /tmp,
#                removed afterwards). Given a --work of an earlier run, the clone
#                is moved to REV and its build directory reused (incremental).
#   --rev REV    what to package (default: HEAD; uncommitted changes are not in it)
#
# The version is meson.build's project version (the one --version, dgld.__version__
# and the protocol report); debian/changelog is written from it here.
# DEB_BUILD_OPTIONS: "parallel=<cores> noautodbgsym" unless set; DGLD_PACKAGE_DEBUG=1
# keeps -g (the default here drops it: the LibTorch sources compile about a third
# faster without it and the .deb is 10x smaller).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=/tmp/dgld-packages
work=""
rev=HEAD
lintian=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --rev) rev=$2; shift 2 ;;
    --no-lintian) lintian=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "package.sh: unknown argument '$1' (expected --out DIR, --work DIR, --rev REV, --no-lintian)" >&2; exit 2 ;;
  esac
done
die() { echo "package.sh: $*" >&2; exit 1; }
for tool in git dpkg-buildpackage dpkg-checkbuilddeps; do
  command -v "$tool" >/dev/null || die "$tool is missing (Debian packages git, dpkg-dev)"
done
commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}") || die "--rev $rev is not a commit of $repo"
if [ -n "$(git -C "$repo" status --porcelain -- debian meson.build config scripts/package.sh 2>/dev/null)" ]; then
  echo "package.sh: note: uncommitted changes to the packaging are not packaged (it builds $rev = ${commit:0:12})" >&2
fi

keep_work=1
if [ -z "$work" ]; then
  work=$(mktemp -d /tmp/dgld-package.XXXXXX)
  keep_work=0
fi
src="$work/dgld"
if [ -d "$src/.git" ]; then
  echo "package.sh: reusing $src (incremental), moving it to ${commit:0:12}" >&2
  git -C "$src" fetch -q "$repo" "$commit"
  git -C "$src" checkout -q --force "$commit"
  git -C "$src" clean -q -fdx -e 'obj-*' -e 'debian/.debhelper' -e 'debian/*.debhelper.log'
  rm -f "$src"/debian/debhelper-build-stamp
  incremental=1
else
  mkdir -p "$work"
  git clone -q --no-local "$repo" "$src"
  git -C "$src" checkout -q --detach "$commit"
  incremental=0
fi

# The one version: meson.build's project(version : ...).
version=$(sed -n "s/^[[:space:]]*version[[:space:]]*:[[:space:]]*'\([^']*\)'.*/\1/p" "$src/meson.build" | head -n1)
[ -n "$version" ] || die "no version : '...' in $src/meson.build's project()"
maint=$(sed -n 's/^Maintainer: //p' "$src/debian/control")
date=$(git -C "$src" log -1 --format=%aD "$commit")
cat >"$src/debian/changelog" <<EOF
dgld ($version) unstable; urgency=medium

  * Built from commit ${commit:0:12} by scripts/package.sh.

 -- $maint  $date
EOF

if ! (cd "$src" && dpkg-checkbuilddeps >/dev/null 2>&1); then
  missing=$(cd "$src" && dpkg-checkbuilddeps 2>&1 | sed -n 's/.*Unmet build dependencies: //p')
  [ "$(id -u)" -eq 0 ] || die "build dependencies missing: $missing (as root: apt-get build-dep $src)"
  echo "package.sh: installing build dependencies: $missing" >&2
  DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -q "$src" >/dev/null
fi

jobs=$(nproc)
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-"parallel=$jobs noautodbgsym"}
if [ "${DGLD_PACKAGE_DEBUG:-0}" != 1 ]; then export DEB_CXXFLAGS_MAINT_STRIP=-g DEB_CFLAGS_MAINT_STRIP=-g; fi
log="$work/build.log"
start=$(date +%s)
echo "package.sh: building dgld $version (${commit:0:12}) in $src; log $log" >&2
flags=(-us -uc)
[ "$incremental" = 1 ] && flags+=(-nc -b)
if ! (cd "$src" && nice -n 19 dpkg-buildpackage "${flags[@]}") >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  die "dpkg-buildpackage failed (whole log: $log)"
fi
secs=$(( $(date +%s) - start ))

mkdir -p "$out"
rm -f "$out"/dgld_* "$out"/python3-dgld_* "$out"/lintian.txt
changes=$(ls "$work"/dgld_"${version}"_*.changes | head -n1)
for f in "$work"/dgld_"$version"* "$work"/python3-dgld_"$version"*; do
  [ -f "$f" ] && cp "$f" "$out/"
done
echo "package.sh: built in $secs s:" >&2
(cd "$out" && ls -l ./*.deb) >&2

rc=0
if [ "$lintian" = 1 ]; then
  command -v lintian >/dev/null || die "lintian is missing (apt-get install lintian), or pass --no-lintian"
  (cd "$out" && lintian --fail-on error --display-info "$(basename "$changes")") >"$out/lintian.txt" 2>&1 || rc=$?
  errors=$(grep -c '^E: ' "$out/lintian.txt" || true)
  warnings=$(grep -c '^W: ' "$out/lintian.txt" || true)
  echo "package.sh: lintian: $errors error(s), $warnings warning(s) ($out/lintian.txt)" >&2
  grep -E '^(E|W): ' "$out/lintian.txt" >&2 || true
  [ "$rc" = 0 ] || echo "package.sh: lintian found errors" >&2
fi
[ "$keep_work" = 1 ] || rm -rf "$work"
echo "$out"
exit $rc

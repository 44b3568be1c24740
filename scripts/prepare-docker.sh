#!/usr/bin/env bash
# Makes Docker Engine and the local registry answer, idempotently, for `npm start` and for
# `npm test` (scripts/test-env.sh): the Debian packages a local agent and scripts/build-images.sh
# need, `dockerd` on the socket of DOCKER_HOST (unix://…, or /var/run/docker.sock) with the storage
# driver Docker picks (overlay2 where the kernel mounts overlays on its data root, vfs otherwise), and `docker-registry` on $GF_LOCAL_REGISTRY (127.0.0.1:5000) with no
# auth. As root it installs and starts what is missing; otherwise it says exactly what to run and
# exits non-zero. Both daemons run detached and outlive the caller, as a system service would.
set -euo pipefail

is_root() { [ "$(id -u)" = 0 ]; }
say() { printf 'prepare-docker: %s\n' "$*"; }
fail() { printf 'prepare-docker: %s\n' "$*" >&2; exit 1; }

DEFAULT_SOCKET=/var/run/docker.sock
DOCKER_PIDFILE=/tmp/gpufarm-dockerd.pid
DOCKER_LOG=/var/log/gpufarm-dockerd.log
REGISTRY_ADDR="${GF_LOCAL_REGISTRY:-127.0.0.1:5000}"
if is_root; then REGISTRY_HOME=/var/lib/gpufarm-registry; else REGISTRY_HOME="${XDG_STATE_HOME:-$HOME/.local/state}/gpufarm-registry"; fi

case "${DOCKER_HOST:-}" in
  '') SOCKET=$DEFAULT_SOCKET ;;
  unix://*) SOCKET=${DOCKER_HOST#unix://} ;;
  *) SOCKET= ;;
esac

docker_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
registry_answers() { curl -fsS -m 2 "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; }

# Debian packages a local agent and the image build need, each checked by a file it installs.
ensure_docker_packages() {
  local missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
  { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || missing+=(busybox-static)
  [ -f /usr/include/openssl/sha.h ] || missing+=(libssl-dev)
  command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  [ ${#missing[@]} -eq 0 ] && return
  if ! is_root; then
    fail "Docker Engine and the image build need packages that are missing. Install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
  fi
  say "installing ${missing[*]} from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The `-H` a dockerd needs to listen where DOCKER_HOST points (nothing for the default socket).
listen_flag() { [ "$SOCKET" = "$DEFAULT_SOCKET" ] || printf ' -H unix://%s' "$SOCKET"; }

ensure_docker_running() {
  if docker_answers; then return; fi
  [ -n "$SOCKET" ] || fail "Docker Engine does not answer on DOCKER_HOST=$DOCKER_HOST; start it there, or unset DOCKER_HOST to use $DEFAULT_SOCKET"
  if ! is_root; then
    if [ -S "$SOCKET" ]; then
      fail "Docker Engine does not answer on $SOCKET for this user, who may not use that socket. Add yourself to the docker group: sudo usermod -aG docker $(id -un) (then log in again)"
    fi
    fail "Docker Engine does not answer on $SOCKET. Start it with: sudo sh -c 'dockerd$(listen_flag) >>$DOCKER_LOG 2>&1 & echo \$! >$DOCKER_PIDFILE'"
  fi
  local running
  running=$(pidof dockerd || true)
  if [ -n "$running" ] && [ "$SOCKET" != "$DEFAULT_SOCKET" ]; then
    # A second dockerd would share the first one's state folders and refuse to start.
    fail "Docker Engine does not answer on $SOCKET (DOCKER_HOST), and dockerd (pid $running) already runs on this machine: point DOCKER_HOST at its socket, or unset DOCKER_HOST to use $DEFAULT_SOCKET"
  fi
  if [ -n "$running" ]; then
    say "dockerd (pid $running) runs but does not answer on $SOCKET yet; waiting"
  else
    # No --storage-driver: Docker tries overlay2 first and falls back to vfs where overlays cannot
    # be mounted (a data root on overlayfs, an old kernel). vfs copies a whole image for every
    # container and layer, which cost the suite minutes of disk copying where overlay2 works.
    say "starting dockerd$(listen_flag) (log $DOCKER_LOG, pid in $DOCKER_PIDFILE)"
    setsid nohup dockerd $(listen_flag) >>"$DOCKER_LOG" 2>&1 </dev/null &
    echo $! >"$DOCKER_PIDFILE"
  fi
  for _ in $(seq 1 60); do docker_answers && return; sleep 0.5; done
  fail "dockerd did not answer on $SOCKET within 30 s; see $DOCKER_LOG"
}

# Debian's default registry config asks for htpasswd auth; ours listens on 127.0.0.1 only,
# with no auth, storing blobs in a folder of ours that outlives any one clone of the repository.
ensure_registry_running() {
  if registry_answers; then return; fi
  mkdir -p "$REGISTRY_HOME/data"
  cat >"$REGISTRY_HOME/config.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $REGISTRY_HOME/data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
YAML
  local pidfile="$REGISTRY_HOME/registry.pid"
  # A registry of ours that is still starting (or still stopping): give it a moment.
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    say "the registry (pid $(cat "$pidfile")) does not answer yet; waiting"
    for _ in $(seq 1 60); do
      registry_answers && return
      kill -0 "$(cat "$pidfile")" 2>/dev/null || break
      sleep 0.5
    done
    kill -0 "$(cat "$pidfile")" 2>/dev/null \
      && fail "the registry (pid $(cat "$pidfile")) runs but does not answer on http://$REGISTRY_ADDR/v2/; see $REGISTRY_HOME/registry.log"
  fi
  say "starting docker-registry on $REGISTRY_ADDR (storage and log in $REGISTRY_HOME, pid in $pidfile)"
  setsid nohup docker-registry serve "$REGISTRY_HOME/config.yml" >>"$REGISTRY_HOME/registry.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  for _ in $(seq 1 40); do registry_answers && return; sleep 0.25; done
  fail "the registry did not answer on http://$REGISTRY_ADDR/v2/; see $REGISTRY_HOME/registry.log (is the port taken?)"
}

ensure_docker_packages
ensure_docker_running
ensure_registry_running
say "Docker Engine $(docker version --format '{{.Server.Version}}') answers on ${SOCKET:-$DOCKER_HOST}, the registry on http://$REGISTRY_ADDR/v2/"

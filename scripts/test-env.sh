#!/usr/bin/env bash
# Prepares what the tests need, idempotently: a running PostgreSQL with a `gpufarm` role that
# may create databases (each test file makes its own), tap built with our plugins, Docker Engine,
# a local registry on 127.0.0.1:5000 and the local test images pushed to it (the agent's tests
# run real containers), and Chromium for the page tests. As root it installs and starts what is missing; otherwise it says
# exactly what to run.
set -euo pipefail

PG_URL="${TEST_DATABASE_URL:-postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres}"
is_root() { [ "$(id -u)" = 0 ]; }
say() { printf 'test-env: %s\n' "$*"; }
fail() { printf 'test-env: %s\n' "$*" >&2; exit 1; }

pg_answers() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }

ensure_postgres_installed() {
  if command -v pg_ctlcluster >/dev/null 2>&1 && ls /etc/postgresql/*/main >/dev/null 2>&1; then return; fi
  if ! is_root; then
    fail "PostgreSQL is not installed. Install it with: sudo apt-get update && sudo apt-get install -y postgresql"
  fi
  say "installing PostgreSQL from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
}

ensure_postgres_running() {
  if pg_answers; then return; fi
  ensure_postgres_installed
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  if ! is_root; then
    fail "PostgreSQL $version is installed but not running. Start it with: sudo pg_ctlcluster $version main start"
  fi
  say "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_answers && return; sleep 0.5; done
  fail "PostgreSQL $version did not answer on 127.0.0.1:5432; see /var/log/postgresql/postgresql-$version-main.log"
}

as_postgres() {
  if is_root; then runuser -u postgres -- "$@"; else sudo -n -u postgres "$@"; fi
}

ensure_test_role() {
  if psql "$PG_URL" -qtAc 'select 1' >/dev/null 2>&1; then return; fi
  if [ -n "${TEST_DATABASE_URL:-}" ]; then
    fail "cannot connect to TEST_DATABASE_URL ($TEST_DATABASE_URL); check the server and the credentials"
  fi
  say "creating the gpufarm test role (LOGIN CREATEDB, password gpufarm)"
  as_postgres psql -qc "DO \$\$ BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'gpufarm') THEN
        CREATE ROLE gpufarm LOGIN CREATEDB PASSWORD 'gpufarm';
      ELSE
        ALTER ROLE gpufarm LOGIN CREATEDB PASSWORD 'gpufarm';
      END IF;
    END \$\$;" \
    || fail "could not create the role; as a PostgreSQL superuser run: CREATE ROLE gpufarm LOGIN CREATEDB PASSWORD 'gpufarm';"
  psql "$PG_URL" -qtAc 'select 1' >/dev/null 2>&1 \
    || fail "the gpufarm role exists but cannot log in over TCP; allow password logins from 127.0.0.1 in pg_hba.conf"
}

# tap compiles its plugin set into node_modules at install time; this repository drops its
# ts-node plugin (tests run through tsx, see package.json "tap"), so a fresh install needs one
# rebuild before the first run, or every test file would be loaded as CommonJS.
ensure_tap_built() {
  local built=node_modules/@tapjs/test/test-built/dist/esm/index.js
  if [ ! -f "$built" ] || grep -q '@tapjs/typescript' "$built"; then
    say "building the tap runner with this repository's plugins"
    npx --no-install tap build >/dev/null
  fi
}

# --- Docker Engine, the local registry and the local images (the agent's runtime tests) ---
DOCKER_PIDFILE=/tmp/gpufarm-dockerd.pid
DOCKER_LOG=/var/log/gpufarm-dockerd.log
REGISTRY_ADDR=127.0.0.1:5000
if is_root; then REGISTRY_HOME=/var/lib/gpufarm-registry; else REGISTRY_HOME="${XDG_STATE_HOME:-$HOME/.local/state}/gpufarm-registry"; fi

docker_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
registry_answers() { curl -fsS -m 2 "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; }

# Debian packages the runtime tests need, each checked by a file it installs.
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
    fail "missing packages for the agent's Docker tests. Install them with: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
  fi
  say "installing ${missing[*]} from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_docker_running() {
  if docker_answers; then return; fi
  if ! is_root; then
    if [ -S /var/run/docker.sock ]; then
      fail "Docker Engine runs but this user cannot use /var/run/docker.sock. Add yourself to the docker group: sudo usermod -aG docker $USER (then log in again)"
    fi
    fail "Docker Engine is not running. Start it with: sudo sh -c 'dockerd --storage-driver=vfs >$DOCKER_LOG 2>&1 & echo \$! >$DOCKER_PIDFILE'"
  fi
  if [ -f "$DOCKER_PIDFILE" ] && kill -0 "$(cat "$DOCKER_PIDFILE")" 2>/dev/null; then
    say "dockerd (pid $(cat "$DOCKER_PIDFILE")) is starting; waiting"
  else
    say "starting dockerd --storage-driver=vfs (log $DOCKER_LOG, pid in $DOCKER_PIDFILE)"
    setsid nohup dockerd --storage-driver=vfs >>"$DOCKER_LOG" 2>&1 </dev/null &
    echo $! >"$DOCKER_PIDFILE"
  fi
  for _ in $(seq 1 60); do docker_answers && return; sleep 0.5; done
  fail "dockerd did not answer on /var/run/docker.sock within 30 s; see $DOCKER_LOG"
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

ensure_images_built() {
  bash scripts/build-images.sh
}

# --- Chromium (the page tests drive Debian's build through playwright-core; no browser download) ---
CHROMIUM=/usr/bin/chromium

ensure_chromium() {
  if [ -x "$CHROMIUM" ]; then return; fi
  if ! is_root; then
    fail "Chromium is missing for the page tests. Install it with: sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium"
  fi
  say "installing chromium from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  [ -x "$CHROMIUM" ] || fail "the chromium package installed no $CHROMIUM"
}

ensure_postgres_running
ensure_test_role
ensure_tap_built
ensure_docker_packages
ensure_docker_running
ensure_registry_running
ensure_images_built
ensure_chromium
# The agent's tests loop-mount each job's /output as the agent does in production; only root can.
is_root || fail "the agent's tests loop-mount /output (mount -o loop), which needs root: run the tests as root, e.g. sudo npm test"
say "PostgreSQL ready at ${PG_URL%%@*}@… (set TEST_DATABASE_URL to use another server)"
say "Docker Engine $(docker version --format '{{.Server.Version}}') and the registry on $REGISTRY_ADDR ready; test images in .gpufarm/images.json"
say "$("$CHROMIUM" --version 2>/dev/null | head -n 1) at $CHROMIUM"

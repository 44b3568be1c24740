#!/usr/bin/env bash
# Prepares what the tests need, idempotently: a running PostgreSQL with a `gpufarm` role that
# may create databases (each test file makes its own), tap built with our plugins, Docker Engine
# and a local registry on 127.0.0.1:5000 (scripts/prepare-docker.sh, which `npm start` runs too),
# the local test images pushed to it (the agent's tests run real containers), Chromium for
# the page tests, HAProxy for the replica tests, redis-server for shared rate limits and the
# dashboard built into web/dist. As root it installs and starts what is missing; otherwise it
# says exactly what to run.
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
# scripts/prepare-docker.sh is shared with `npm start`, which prepares the same.
ensure_docker() {
  bash "$(dirname "${BASH_SOURCE[0]}")/prepare-docker.sh"
}

ensure_images_built() {
  bash scripts/build-images.sh
}

# --- Tools from Debian's packages: installed when missing as root, otherwise the command to run ---
# ensure_package COMMAND PACKAGE WHAT-NEEDS-IT: the package that provides COMMAND (a name on the
# PATH or an absolute path). Only the binaries are used: each test runs its own instance with a
# generated config, so no recommended packages.
ensure_package() {
  local command=$1 package=$2 purpose=$3
  if command -v "$command" >/dev/null 2>&1; then return; fi
  if ! is_root; then
    fail "$package is missing for $purpose. Install it with: sudo apt-get update && sudo apt-get install -y --no-install-recommends $package"
  fi
  say "installing $package from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >/dev/null
  command -v "$command" >/dev/null 2>&1 || fail "the $package package installed no $command"
}

# --- The dashboard's build (the page tests and the control plane serve web/dist; rebuilt only when its inputs changed) ---
ensure_web_built() {
  (cd "$(dirname "${BASH_SOURCE[0]}")/.." && NODE_OPTIONS='' node_modules/.bin/tsx scripts/src/web-build.ts) \
    || fail "the dashboard did not build (see above)"
}

# --- The typecheck (tsc -b, incremental: an unchanged tree costs seconds): a type error stops the
# run here, before any test.
ensure_types_checked() {
  say "type-checking the workspaces (tsc -b)"
  (cd "$(dirname "${BASH_SOURCE[0]}")/.." && node_modules/.bin/tsc -b) \
    || fail "the workspaces do not type-check: fix the errors above (npm run typecheck shows them again)"
}

ensure_postgres_running
ensure_test_role
ensure_tap_built
ensure_types_checked
ensure_docker
ensure_images_built
# The page tests drive Debian's Chromium through playwright-core (no browser download).
CHROMIUM=/usr/bin/chromium
ensure_package "$CHROMIUM" chromium 'the page tests'
# The replica tests and `npm run cluster` put HAProxy in front of the control planes.
ensure_package haproxy haproxy 'the replica tests'
# Shared rate limits: the rate-limit tests, `npm run cluster` and the bench start their own
# redis-server (Debian's package also enables a system service; ours run on ports of their own).
ensure_package redis-server redis-server 'the rate-limit tests and npm run cluster'
# The metrics test scrapes a control plane and an agent with Prometheus.
ensure_package prometheus prometheus 'the metrics test'
# The .deb test installs the agent into a stock Debian 12 root it makes (scripts/debian-root.sh).
ensure_package debootstrap debootstrap 'the .deb test'
ensure_web_built
# The agent's tests loop-mount each job's /output as the agent does in production; only root can.
is_root || fail "the agent's tests loop-mount /output (mount -o loop), which needs root: run the tests as root, e.g. sudo npm test"
say "PostgreSQL ready at ${PG_URL%%@*}@… (set TEST_DATABASE_URL to use another server)"
say "test images in .gpufarm/images.json"
say "$("$CHROMIUM" --version 2>/dev/null | head -n 1) at $CHROMIUM"

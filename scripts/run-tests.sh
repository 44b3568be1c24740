#!/usr/bin/env bash
# Runs the test suite once, the way it ships: every test file on Node 24, the production runtime
# (the control plane's image and the agent's package carry it); then the client package's tests
# (@gpufarm/client and `gf`, which customers install on their own Node) on the oldest Node it
# declares. Both runtimes come from scripts/node.sh (fetched once from the npm registry).
# With arguments, runs just those test files (tap's arguments) on Node 24.
# Each pass ends with tap's own summary line (`# { total: N, pass: N }`); .ci/run adds them up.
set -uo pipefail
cd "$(dirname "$0")/.."

runtime() {
  local bin
  bin=$(bash scripts/node.sh "$1") || { echo "run-tests: scripts/node.sh $1 could not provide Node; see above" >&2; exit 1; }
  echo "$bin"
}

pass() {
  local label=$1 bin=$2; shift 2
  local started=$SECONDS
  local shown="$*"
  # A pass given the whole list of files says how many, not each name.
  [ $# -le 8 ] || shown="$(printf '%s\n' "$@" | grep -c '\.test\.ts$') files$(printf ' %s' "$@" | grep -oE ' --[^ ]+' | tr -d '\n')"
  echo "::: tests on $label ($("$bin/node" --version)): tap $shown"
  # tap's own bin, not npx: npm 11 warns on Node 20.11.
  PATH="$bin:$PATH" node_modules/.bin/tap "$@"
  local code=$?
  echo "::: tests on $label took $((SECONDS - started)) s"
  return $code
}

node24=$(runtime 24) || exit 1
# The agent and the control plane as the tests start them: bundled, not through tsx (seconds).
NODE_OPTIONS='' node_modules/.bin/tsx scripts/src/build-test-bundles.ts || { echo "run-tests: bundling the agent and the control plane failed; see above" >&2; exit 1; }
if [ $# -gt 0 ]; then
  pass 'Node 24' "$node24" "$@"
  exit
fi
oldest=$(runtime oldest) || exit 1

# Builds that take minutes of disk copying or downloading and little CPU start beside the tests,
# so the files that need them find them ready: the control plane's image (vfs layers) and the
# Debian 12 root of the .deb test (debootstrap, once per machine). Each script takes a lock, so
# the test's own call waits for this one and then finds the result.
mkdir -p test-output
beside=()
for build in build-control-plane-image debian-root; do
  bash "scripts/$build.sh" >"test-output/$build.log" 2>&1 &
  beside+=("$!:$build")
done

# Files that spend minutes waiting on timers (a job that writes for 90 s, machines going offline
# and lost, challenge windows) and use little CPU start first, two at a time in a tap of their own
# beside the pass. In name order they started among the last files and left the cores idle at the
# end of the pass (see docs/decisions.md).
# Then, in the same two places, idle for the rest of the pass, the client's tests (@gpufarm/client
# and `gf`, which customers run on their own Node) on the oldest Node it declares; the agent and
# the control plane ship with their own Node 24.
# Ten minutes a file: on that Node each file loads the client and the control plane through tsx
# without a compile cache, and beside the Node 24 pass its files take three times as long as
# alone. They leave through client/test/helpers/exit-at-end.ts: Node 20.11's own teardown can spin
# forever after a file is done (see there). tap takes --node-arg whole, so package.json's three are repeated.
waiting=(test/soak.test.ts test/e2e-partition.test.ts test/e2e-agent-failures.test.ts test/e2e-outcomes.test.ts)
mapfile -t others < <(PATH="$node24:$PATH" node_modules/.bin/tap list | grep -vxF -f <(printf '%s\n' "${waiting[@]}"))
(
  lane=0
  pass 'Node 24, the waiting files' "$node24" --jobs=2 "${waiting[@]}" >test-output/waiting-pass.log 2>&1 || lane=1
  pass "the client's oldest Node" "$oldest" --jobs=2 --timeout=600 \
    --node-arg=--import=tsx --node-arg=--conditions=@gpufarm/source --node-arg=--import=./test/helpers/tap-children.ts --node-arg=--import=./client/test/helpers/exit-at-end.ts \
    'client/test/**/*.test.ts' >test-output/client-pass.log 2>&1 || lane=1
  exit $lane
) &
lane_pid=$!

status=0
pass 'Node 24' "$node24" "${others[@]}" || status=1
wait "$lane_pid" || status=1
cat test-output/waiting-pass.log test-output/client-pass.log
for entry in "${beside[@]}"; do
  wait "${entry%%:*}" || echo "::: scripts/${entry#*:}.sh failed beside the tests: see test-output/${entry#*:}.log"
done
exit $status

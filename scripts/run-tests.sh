#!/usr/bin/env bash
# Runs the test suite once, the way it ships: every test file on Node 24, the production runtime
# (the control plane's image and the agent's package carry it), and the client package's tests
# (@gpufarm/client and `gf`, which customers install on their own Node) also on the oldest Node
# it declares, in two lanes side by side (below). Both runtimes come from scripts/node.sh
# (fetched once from the npm registry). With arguments, runs just those test files (tap's
# arguments) on Node 24. Each of the three passes ends with tap's own summary line
# (`# { total: N, pass: N }`); .ci/run adds them up.
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
  echo "::: tests on $label ($("$bin/node" --version)): tap $*"
  # tap's own bin, not npx: npm 11 warns on Node 20.11.
  PATH="$bin:$PATH" node_modules/.bin/tap "$@"
  local code=$?
  echo "::: tests on $label took $((SECONDS - started)) s"
  return $code
}

node24=$(runtime 24)
# The agent and the control plane as the tests start them: bundled, not through tsx (seconds).
NODE_OPTIONS='' node_modules/.bin/tsx scripts/src/build-test-bundles.ts || { echo "run-tests: bundling the agent and the control plane failed; see above" >&2; exit 1; }
if [ $# -gt 0 ]; then
  pass 'Node 24' "$node24" "$@"
  exit
fi

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

# Two lanes of two test files each, side by side: the end-to-end files under test/ (half of the
# suite's time, and its longest files), then the client's tests on its oldest Node; and every
# package's own tests. tap runs a pass's files in name order, so in one pass the longest files
# (test/…) came last and ran against each other at the end; in lanes they spread over the run.
# Each lane's TAP goes to test-output/lane-*.log, printed whole when both are done; meanwhile
# each finished file's line is printed as it comes.
packages=$(node -e "for (const g of require('./package.json').tap.include) if (!g.startsWith('test/')) console.log(g)")
mapfile -t package_globs <<<"$packages"
status=0
(
  code=0
  pass 'Node 24, end-to-end files (test/)' "$node24" --jobs=2 'test/**/*.test.ts' || code=1
  # Only the client: the agent and the control plane ship with their own Node 24.
  pass "the client's oldest Node" "$(runtime oldest)" --jobs=2 'client/test/**/*.test.ts' || code=1
  exit $code
) >test-output/lane-e2e.log 2>&1 &
lane_e2e=$!
pass "Node 24, the packages' own tests" "$node24" --jobs=2 "${package_globs[@]}" >test-output/lane-packages.log 2>&1 &
lane_packages=$!
tail -q -n +1 -F test-output/lane-e2e.log test-output/lane-packages.log 2>/dev/null > >(grep --line-buffered -E '^(not )?ok [0-9]+ - |^::: ') &
progress=$!
wait "$lane_e2e" || status=1
wait "$lane_packages" || status=1
sleep 1
kill "$progress" 2>/dev/null
wait "$progress" 2>/dev/null
for lane in packages e2e; do
  echo "::: the whole TAP of lane $lane (test-output/lane-$lane.log):"
  cat "test-output/lane-$lane.log"
done
for entry in "${beside[@]}"; do
  wait "${entry%%:*}" || echo "::: scripts/${entry#*:}.sh failed beside the tests: see test-output/${entry#*:}.log"
done
exit $status

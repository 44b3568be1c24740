#!/usr/bin/env bash
# `npm run bench`: the bench on Node 24, the runtime the control plane and the agent ship with
# (scripts/node.sh fetches it once), whatever Node runs npm. The processes it starts (the control
# plane, the bare ws baseline, the simulated agents) run on the same Node (process.execPath).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$(bash scripts/node.sh 24) || { echo "bench: scripts/node.sh 24 could not provide Node 24; see above" >&2; exit 1; }
PATH="$bin:$PATH" exec node --import tsx scripts/src/bench.ts "$@"

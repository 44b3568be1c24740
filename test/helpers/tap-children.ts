// Preloaded into every test file (package.json's tap `node-arg`, and scripts/run-tests.sh for the
// client's pass). tap's process bookkeeping (@tapjs/processinfo) rides on NODE_OPTIONS into every
// process a test starts (control planes, agents, `gf`) and records each module that process loads:
// it reads the file again, tests it for a source map and splits it into lines. That doubled the
// CPU of starting the agent's bundle (`gf-agent --help`: 0.62 CPU-s without, 1.14 with). Coverage
// is off (package.json) and nothing reads those records, so the children get an exclusion that
// matches every file and the hook returns at once; spawns that copy `process.env` and spawns
// that inherit it both pass it on. The test file's own process read its exclusion before this
// runs and keeps recording.
process.env._TAPJS_PROCESSINFO_EXCLUDE_ = '/./';

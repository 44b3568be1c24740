/** Bundles the agent and the control plane for the tests to start (shared/build/test-bundles.ts); scripts/run-tests.sh runs it first. */
import { buildTestBundles } from '@gpufarm/shared/build/test-bundles';

const started = Date.now();
await buildTestBundles();
console.log(`test-bundles: the agent and the control plane bundled for the tests in ${((Date.now() - started) / 1000).toFixed(1)} s`);

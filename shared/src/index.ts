/**
 * `@gpufarm/shared`: the contract, safe in a browser (the dashboard bundles it). Nothing reached
 * from here imports a `node:` module or a Node-only package, or uses Node's globals
 * (`shared/test/architecture.test.ts`); the Node-only code is `@gpufarm/shared/node` (`node.ts`).
 */
export * from './errors.js';
export * from './catalog/gpu-classes.js';
export * from './catalog/gpu-classify.js';
export * from './catalog/regions.js';
export * from './constants.js';
export * from './money.js';
export * from './format/bytes.js';
export * from './net/listen-address.js';
export * from './schemas/index.js';
export * from './dashboard/job-timeline.js';
export * from './dashboard/withdrawals.js';
export * from './dashboard/job-fit.js';
export * from './dashboard/job-summaries.js';
export * from './templates/job-templates.js';
export * from './templates/template-save.js';
export * from './fleet/earning.js';
export * from './protocol/index.js';
export * from './contracts/escrow.generated.js';
export * from './records/canonical-json.js';
export * from './proof/challenge-plan.js';
export * from './process/json-log.js';
export * from './setting-docs.js';
export * from './client-settings.js';
export * from './image-patterns.js';
export * from './fleet/gpu-health.js';
export * from './fleet/machine-state.js';
export * from './fleet/pre-offer.js';
export * from './fleet/api.js';

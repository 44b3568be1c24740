/**
 * The client library for a browser (`@gpufarm/client/browser`): the same typed `/v1` methods as
 * `createClient`, without Node (no file download), with `GfError` and `fundJob`.
 */
export * from './errors.js';
export { createBrowserClient, type BrowserClient, type ClientOptions, type JobSpec, type CapacityQuery, type JobListQuery, type LogQuery, type PageQuery, type ArtifactLocation } from './browser-client.js';
export { backoffMs, newIdempotencyKey, retryAfterMs, type RequestEvent, type TransportOptions } from './transport.js';
export type { WaitOptions } from './wait.js';
export type { FollowLogsEnd, FollowLogsOptions } from './follow.js';
export { fundJob, type FundingApi, type FundingWallet, type FundJobOptions, type FundStep } from './fund.js';

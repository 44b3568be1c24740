/** The customer client library: `createClient` and its typed `/v1` methods, and `GfError`. */
export * from './http.js';
export * from './errors.js';
export { createClient, type ClientOptions, type JobSpec, type GfClient, type CapacityQuery, type JobListQuery, type LogQuery, type PageQuery, type ArtifactLocation } from './client.js';
export { backoffMs, newIdempotencyKey, retryAfterMs, type RequestEvent, type TransportOptions } from './transport.js';
export type { WaitOptions } from './wait.js';
export type { FollowLogsEnd, FollowLogsOptions } from './follow.js';
export { fundJob, fundingGasLimit, type FundingApi, type FundingWallet, type FundJobOptions, type FundStep } from './fund.js';
export type { DownloadOptions, DownloadResult } from './download.js';

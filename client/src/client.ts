import { type BrowserClient, createBrowserClient, type ClientOptions } from './browser-client.js';
import { downloadArtifact, type DownloadOptions, type DownloadResult } from './download.js';

export type { ArtifactLocation, BillingQuery, CapacityQuery, ClientOptions, JobListQuery, JobSpec, LogQuery, PageQuery } from './browser-client.js';

/**
 * The gpufarm API for a program: one typed method per `/v1` endpoint, each answer checked
 * against the `shared` schema of its resource, failures as `GfError`.
 *
 * @example
 * const gf = createClient({ baseUrl: 'https://gpufarm.example', apiKey: process.env.GF_API_KEY });
 * for await (const job of gf.jobs.listAll({ status: ['RUNNING'] })) console.log(job.id);
 */
export function createClient(options: ClientOptions) {
  const { transport, ...client }: BrowserClient = createBrowserClient(options);
  return {
    ...client,
    /** Downloads an artifact to `destPath`, verified against its recorded SHA-256; see `DownloadOptions`. */
    downloadArtifact: (artifactId: string, destPath: string, opts: DownloadOptions = {}): Promise<DownloadResult> =>
      downloadArtifact({ location: client.artifacts.location, fetch: transport.fetch, onRequest: options.onRequest }, artifactId, destPath, opts),
  };
}

export type GfClient = ReturnType<typeof createClient>;

import type { BlobStore } from '../artifacts/blob-store.js';
import type { ExecutionConfig } from '../config.js';
import type { Database } from '../db/database.js';
import type { EscrowDeps } from '../jobs/funding.js';

/** What the execution slice works with, built once in `server.ts` (or a test). */
export interface ExecutionDeps {
  db: Database;
  /** null: no escrow configured (settlement and refunds wait for one). */
  escrow: EscrowDeps | null;
  config: ExecutionConfig;
  blobs: BlobStore;
  log?: (message: string, err?: unknown) => void;
}

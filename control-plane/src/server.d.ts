import type { FastifyInstance } from 'fastify';
import { type OfferIndex } from './capacity/offer-index.js';
import type { Config } from './config.js';
import type { Database } from './db/database.js';
export interface ControlPlane {
    app: FastifyInstance;
    db: Database;
    offerIndex: OfferIndex;
    /** Where it listens, e.g. `http://127.0.0.1:8080`. */
    url: string;
    close(): Promise<void>;
}
/**
 * Wires the control plane once: database (migrated, catalog synced), rate-limit store, offer
 * index, HTTP app; then listens. Everything opened here is closed by `close()`.
 */
export declare function startControlPlane(config: Config, options?: {
    logger?: boolean;
}): Promise<ControlPlane>;

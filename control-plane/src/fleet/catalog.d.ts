import type { Queryable } from '../db/database.js';
/** Upserts the shared catalogs (GPU classes, regions) into their tables; run at every start. */
export declare function syncCatalog(db: Queryable): Promise<void>;

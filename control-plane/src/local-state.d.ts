import { z } from 'zod';
/**
 * `<dataDir>/control-plane.json` (mode 0600): written by a control plane running on the
 * embedded database, so other local commands (`npm run admin`, `npm run seed`) know it is
 * there, reach it over HTTP, and never open the same PGlite files from a second process.
 */
declare const stateSchema: z.ZodObject<{
    pid: z.ZodNumber;
    url: z.ZodURL;
    adminToken: z.ZodNullable<z.ZodString>;
}, z.core.$strip>;
export type LocalState = z.infer<typeof stateSchema>;
export declare function writeLocalState(dataDir: string, state: LocalState): void;
/** The running local control plane's state, or null when none runs (a stale file is ignored). */
export declare function readLiveLocalState(dataDir: string): LocalState | null;
export declare function removeLocalState(dataDir: string, pid?: number): void;
export {};

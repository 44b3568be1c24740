/** Raised when no connection to the database could be made at all. */
export declare class DatabaseUnavailableError extends Error {
    constructor(cause: unknown);
}
/**
 * True when an error means the database cannot be reached (as opposed to a bad statement):
 * such errors become 503 `unavailable`, everything else 500 `internal`.
 */
export declare function isDatabaseUnavailable(err: unknown): boolean;

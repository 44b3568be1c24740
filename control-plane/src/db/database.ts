/**
 * The one database port every store uses. Two adapters implement it: PostgreSQL through `pg`
 * (`postgres.ts`) and PGlite, the embedded default (`pglite.ts`). Both return int8 as a number
 * when it is a safe integer and as a bigint otherwise; numeric stays a string.
 */
export type SqlParam = string | number | bigint | boolean | null | Date | readonly string[] | readonly number[];

export interface Queryable {
  /** Runs one parameterised statement and returns its rows. */
  query<Row = Record<string, unknown>>(sql: string, params?: readonly SqlParam[]): Promise<Row[]>;
}

/** A connection inside a transaction. */
export interface Transaction extends Queryable {
  /** Runs several statements separated by semicolons, without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

export interface Database extends Transaction {
  readonly kind: 'postgres' | 'pglite';
  /** Runs `fn` in one transaction on one connection; rolls back when it throws. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /** Subscribes to NOTIFY on `channel`; resolves to the unsubscribe function. */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** int8 text as a number when safe, a bigint when not (token amounts never live in int8). */
export function parseInt8(text: string): number | bigint {
  const value = BigInt(text);
  return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(value) : value;
}

export const INT8_OID = 20;

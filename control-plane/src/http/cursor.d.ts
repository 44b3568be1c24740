import type { z } from 'zod';
/** Opaque cursors: base64url JSON, validated with a schema when read back. */
export declare function encodeCursor(value: unknown): string;
/** Decodes a cursor or throws 400 `invalid_request` naming the `cursor` parameter. */
export declare function decodeCursor<T>(cursor: string, schema: z.ZodType<T>, field?: string): T;

import { ApiError, fieldDetail } from '@gpufarm/shared';
import type { z } from 'zod';

/** Opaque cursors: base64url JSON, validated with a schema when read back. */
export function encodeCursor(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** Decodes a cursor or throws 400 `invalid_request` naming the `cursor` parameter. */
export function decodeCursor<T>(cursor: string, schema: z.ZodType<T>, field = 'cursor'): T {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    raw = undefined;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new ApiError('invalid_request', `${field} is not a cursor this endpoint issued; pass nextCursor from the previous page unchanged.`, {
      details: [fieldDetail(field, 'is malformed', { subject: true })],
    });
  }
  return parsed.data;
}

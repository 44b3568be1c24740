import { ApiError, type ErrorDetail } from '@gpufarm/shared';
import { z } from 'zod';

function pathOf(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : out ? `.${String(part)}` : String(part);
  return out;
}

/** One detail per offending field, named by its path (`a.b[0].c`). */
export function zodDetails(error: z.ZodError, prefix = ''): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const field = pathOf([...(prefix ? [prefix] : []), ...issue.path, key]);
        details.push({ field, message: `${field} is not a known field` });
      }
      continue;
    }
    const field = pathOf([...(prefix ? [prefix] : []), ...issue.path]) || 'body';
    if (!details.some((d) => d.field === field)) details.push({ field, message: `${field}: ${issue.message}` });
  }
  return details;
}

function invalid(details: ErrorDetail[]): ApiError {
  return new ApiError('invalid_request', details.map((d) => d.message).join('; '), { details });
}

/**
 * Parses a query string object with a strict zod schema. Unknown, repeated and malformed
 * parameters give 400 `invalid_request` with one detail per parameter, named in the message.
 */
export function parseQuery<S extends z.ZodObject>(schema: S, query: unknown): z.infer<S> {
  const params = (query ?? {}) as Record<string, unknown>;
  const repeated = Object.entries(params)
    .filter(([, value]) => Array.isArray(value))
    .map(([name]) => ({ field: name, message: `${name} was given more than once` }));
  if (repeated.length > 0) throw invalid(repeated);
  const parsed = schema.strict().safeParse(params);
  if (!parsed.success) throw invalid(zodDetails(parsed.error));
  return parsed.data as z.infer<S>;
}

/** Parses a JSON body (admin and small write endpoints) or throws 400 `invalid_request`. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalid(zodDetails(parsed.error));
  return parsed.data;
}

/** Parses path parameters or throws 400 `invalid_request` naming the malformed id. */
export const parseParams = parseBody;

/** An integer query parameter within bounds, with a default. */
export function intParam(name: string, min: number, max: number, fallback: number) {
  const message = `${name} must be an integer from ${min} to ${max}`;
  return z
    .string()
    .regex(/^\d{1,9}$/, message)
    .transform(Number)
    .pipe(z.number().int().min(min, message).max(max, message))
    .default(fallback);
}

import { ApiError, fieldDetail, type ErrorDetail } from '@gpufarm/shared';
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
        details.push(fieldDetail(field, 'is not a known field', { subject: true }));
      }
      continue;
    }
    const field = pathOf([...(prefix ? [prefix] : []), ...issue.path]) || 'body';
    if (!details.some((d) => d.field === field)) details.push(fieldDetail(field, issue.message));
  }
  return details;
}

function invalid(details: ErrorDetail[]): ApiError {
  return new ApiError('invalid_request', details.map((d) => d.message).join('; '), { details });
}

/**
 * Parses a query string object with a strict zod schema (`z.strictObject`, built once: zod
 * derives nothing per call). An empty value (`?model=`) counts as absent, as HTML forms send
 * it. Unknown, repeated and malformed parameters give 400 `invalid_request` with one detail
 * per parameter, named in the message.
 */
export function parseQuery<S extends z.ZodObject>(schema: S, query: unknown, endpoint: string): z.infer<S> {
  const known = Object.keys(schema.shape);
  const params: Record<string, unknown> = {};
  const problems: ErrorDetail[] = [];
  for (const [name, value] of Object.entries((query ?? {}) as Record<string, unknown>)) {
    if (!known.includes(name)) problems.push(fieldDetail(name, `is not a parameter of ${endpoint} (known: ${known.join(', ')})`, { subject: true }));
    else if (Array.isArray(value)) problems.push(fieldDetail(name, 'was given more than once', { subject: true }));
    else if (value !== '') params[name] = value;
  }
  if (problems.length > 0) throw invalid(problems);
  const parsed = schema.safeParse(params);
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

/** What a numeric parameter is in the OpenAPI document. */
export interface NumericParam {
  type: 'integer' | 'number';
  minimum?: number;
  maximum?: number;
  exclusiveMaximum?: number;
  default?: number;
  description?: string;
}

/**
 * Types a parameter the server reads from text (query strings and paths are text) as the number
 * it means in the OpenAPI document, so a generated client sends `limit: 10`. Parsing is unchanged.
 */
export function numericParam<S extends z.ZodType>(schema: S, documented: NumericParam): S {
  return schema.meta({
    override: ({ jsonSchema }) => {
      for (const key of Object.keys(jsonSchema)) if (key !== 'description') delete (jsonSchema as Record<string, unknown>)[key];
      Object.assign(jsonSchema, documented);
    },
  });
}

/** An integer query parameter within bounds, with a default. */
export function intParam(min: number, max: number, fallback: number) {
  const message = `must be an integer from ${min} to ${max}`;
  const schema = z
    .string()
    .regex(/^\d{1,9}$/, message)
    .transform(Number)
    .pipe(z.number().int().min(min, message).max(max, message))
    .default(fallback);
  return numericParam(schema, { type: 'integer', minimum: min, maximum: max, default: fallback });
}

import { type ErrorDetail } from '@gpufarm/shared';
import { z } from 'zod';
/** One detail per offending field, named by its path (`a.b[0].c`). */
export declare function zodDetails(error: z.ZodError, prefix?: string): ErrorDetail[];
/**
 * Parses a query string object with a strict zod schema. Unknown, repeated and malformed
 * parameters give 400 `invalid_request` with one detail per parameter, named in the message.
 */
export declare function parseQuery<S extends z.ZodObject>(schema: S, query: unknown): z.infer<S>;
/** Parses a JSON body (admin and small write endpoints) or throws 400 `invalid_request`. */
export declare function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S>;
/** Parses path parameters or throws 400 `invalid_request` naming the malformed id. */
export declare const parseParams: typeof parseBody;
/** An integer query parameter within bounds, with a default. */
export declare function intParam(name: string, min: number, max: number, fallback: number): z.ZodDefault<z.ZodPipe<z.ZodPipe<z.ZodString, z.ZodTransform<number, string>>, z.ZodNumber>>;

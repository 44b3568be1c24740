import { z } from 'zod';
import type { ErrorDetail } from '../errors.js';
import { fieldError, isCleanText, issuesToDetails } from '../schemas/common.js';
import { jobCreateRequestSchema, type JobCreateRequest } from '../schemas/job-create.js';
import { TEMPLATE_LIMITS, templateNameSchema } from './job-templates.js';

/**
 * Saving a template (`PUT /v1/templates/:name`): apart from the template's own shapes because
 * it holds the job-create schema, whose DNS checks use Node's `net`; the browser SDK reads
 * templates without it.
 */

const DESCRIPTION_MESSAGE = `must be a string of at most ${TEMPLATE_LIMITS.descriptionMaxChars} characters without NUL characters`;

/** The body of `PUT /v1/templates/:name`: the spec (the body `POST /v1/jobs` takes) and an optional description. */
export const templateSaveRequestSchema = z.strictObject(
  {
    description: z
      .string(fieldError(DESCRIPTION_MESSAGE))
      .refine((s) => [...s].length <= TEMPLATE_LIMITS.descriptionMaxChars && isCleanText(s), fieldError(DESCRIPTION_MESSAGE))
      .meta({ maxLength: TEMPLATE_LIMITS.descriptionMaxChars })
      .nullable()
      .optional(),
    spec: jobCreateRequestSchema,
  },
  { error: 'must be a JSON object {"spec": {…}, "description": "…"}' },
);
export type TemplateSaveRequest = z.infer<typeof templateSaveRequestSchema>;

export type TemplateSaveParseResult =
  | { ok: true; value: { name: string; description: string | null; spec: JobCreateRequest } }
  | { ok: false; code: 'invalid_request' | 'validation_error'; details: ErrorDetail[] };

const isSpecField = (field: string) => field.startsWith('spec.') || field.startsWith('spec[');

/**
 * Checks a template save: its name (from the path) and body. A wrong name, description or body
 * shape is `invalid_request`; when only the spec's own fields are wrong it is `validation_error`,
 * as `POST /v1/jobs` answers the same spec, each field named under `spec.` (`spec.gpu.count`).
 */
export function parseTemplateSave(name: unknown, body: unknown): TemplateSaveParseResult {
  const details: ErrorDetail[] = [];
  const checkedName = templateNameSchema.safeParse(name);
  if (!checkedName.success) details.push(...issuesToDetails(checkedName.error.issues.map((issue) => ({ ...issue, path: ['name'] }))));
  const checked = templateSaveRequestSchema.safeParse(body);
  if (!checked.success) details.push(...issuesToDetails(checked.error.issues));
  if (!checkedName.success || !checked.success) return { ok: false, code: details.every((d) => isSpecField(d.field)) ? 'validation_error' : 'invalid_request', details };
  return { ok: true, value: { name: checkedName.data, description: checked.data.description?.trim() || null, spec: checked.data.spec } };
}


import type { z } from 'zod';

type Issue = z.core.$ZodIssue;
type UnknownFieldsIssue = Extract<Issue, { code: 'unrecognized_keys' }>;

// One round per level of nesting a removal can uncover; the API's resources nest far less.
const MAX_ROUNDS = 8;

const isUnknownFields = (issue: Issue): issue is UnknownFieldsIssue => issue.code === 'unrecognized_keys';

/**
 * Parses what the server answered with the schema of its resource, leaving out the fields the
 * schema does not know. The shared schemas are strict so that the server's own tests catch a field
 * it leaks; a server newer than this client may add fields, and a client a customer installed
 * must go on working then. Any other mismatch (a field missing, a wrong type, a status this client
 * does not know) still fails. `data` is not changed.
 */
export function parseAnswer<T>(schema: z.ZodType<T>, data: unknown): z.ZodSafeParseResult<T> {
  let result = schema.safeParse(data);
  let copy: unknown = null;
  for (let round = 0; !result.success && round < MAX_ROUNDS; round++) {
    const issues = result.error.issues;
    if (!issues.every(isUnknownFields)) break;
    copy ??= structuredClone(data);
    for (const issue of issues) removeFields(copy, issue.path, issue.keys);
    result = schema.safeParse(copy);
  }
  return result;
}

function removeFields(root: unknown, path: readonly PropertyKey[], names: readonly string[]): void {
  let node = root;
  for (const step of path) {
    if (node === null || typeof node !== 'object') return;
    node = (node as Record<PropertyKey, unknown>)[step];
  }
  if (node === null || typeof node !== 'object' || Array.isArray(node)) return;
  for (const name of names) delete (node as Record<string, unknown>)[name];
}

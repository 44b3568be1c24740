import { markdownTable } from './settings-table.js';

/**
 * The API reference's derived part (docs/API.md), written from the OpenAPI document the server
 * serves at `GET /v1/openapi.json`: every operation with its scope, parameters, body, answers and
 * error codes, then every named schema as a table of its fields. It reads the JSON document, not
 * the zod schemas, so the page says what a generated client sees.
 */

/** The parts of JSON Schema the document uses. */
interface Schema {
  $ref?: string;
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  format?: string;
  pattern?: string;
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  maxProperties?: number;
  uniqueItems?: boolean;
  default?: unknown;
  description?: string;
  contentMediaType?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: Schema | boolean;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
}

interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  description?: string;
  schema: Schema;
}

interface Response {
  description: string;
  headers?: Record<string, { $ref?: string; description?: string }>;
  content?: Record<string, { schema: Schema }>;
  'x-error-codes'?: string[];
}

interface Operation {
  summary: string;
  description?: string;
  tags: string[];
  'x-scopes'?: string[];
  security?: unknown[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
  responses: Record<string, Response>;
}

export interface ApiDocument {
  tags: Array<{ name: string; description: string }>;
  paths: Record<string, Record<string, Operation>>;
  info: { version: string };
  components: { schemas: Record<string, Schema>; headers: Record<string, { description: string; schema: Schema }> };
}

const code = (value: unknown) => `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;
/** A long pattern (an image reference's) would fill the column: the document has it. */
const PATTERN_SHOWN = 80;
/** Ranges up to 2^53 are the JSON number's, not the API's: left out. */
const shownBound = (n: number | undefined) => (n !== undefined && Math.abs(n) < 2 ** 52 ? n : undefined);
const refName = (ref: string) => ref.slice(ref.lastIndexOf('/') + 1);
/** A named schema's link: its heading below (`#### JobCreated`). */
const schemaLink = (name: string) => (name.startsWith('__') ? 'any JSON value' : `[${name}](#${name.toLowerCase()})`);

function range(min: number | undefined, max: number | undefined, unit = ''): string {
  if (min !== undefined && max !== undefined) return min === max ? `${min}${unit}` : `${min}–${max}${unit}`;
  if (min !== undefined) return `≥ ${min}${unit}`;
  if (max !== undefined) return `≤ ${max}${unit}`;
  return '';
}

/** One schema's type with its limits, in a few words; objects and arrays name their parts elsewhere (the field rows). */
export function typeText(schema: Schema): string {
  if (schema.$ref) return schemaLink(refName(schema.$ref));
  const union = schema.anyOf ?? schema.oneOf;
  if (union) return union.map(typeText).join(' or ');
  if (schema.const !== undefined) return code(schema.const);
  if (schema.enum) return schema.enum.map(code).join(', ');
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (types.length === 0) return schema.description === 'Any JSON value' ? 'any JSON value' : 'any';
  return types.map((type) => {
    const words: string[] = [type];
    if (type === 'integer' || type === 'number') {
      const low = shownBound(schema.minimum);
      const high = shownBound(schema.maximum);
      const lowOpen = shownBound(schema.exclusiveMinimum);
      const highOpen = shownBound(schema.exclusiveMaximum);
      if (lowOpen === undefined && highOpen === undefined) words.push(range(low, high));
      else words.push([lowOpen !== undefined ? `> ${lowOpen}` : low !== undefined ? `≥ ${low}` : '', highOpen !== undefined ? `< ${highOpen}` : high !== undefined ? `≤ ${high}` : ''].filter(Boolean).join(', '));
    } else if (type === 'string') {
      if (schema.format) words.push(schema.format);
      if (schema.contentMediaType) words.push(`(${schema.contentMediaType})`);
      // minLength 1 is "not empty", which every pattern or enum already says.
      const length = schema.minLength === 1 && schema.maxLength === undefined ? 'not empty' : range(schema.minLength || undefined, schema.maxLength, ' chars');
      if (length) words.push(length);
      // A date-time's pattern only restates its format.
      if (schema.pattern && schema.format !== 'date-time') words.push(schema.pattern.length <= PATTERN_SHOWN ? `matching ${code(schema.pattern)}` : 'matching the pattern in the document');
    } else if (type === 'array') {
      const items = range(schema.minItems, schema.maxItems, ' items');
      if (items) words.push(items);
      if (schema.uniqueItems) words.push('unique');
      if (schema.items) words.push(`of ${typeText(schema.items)}`);
    } else if (type === 'object' && schema.additionalProperties && typeof schema.additionalProperties === 'object') {
      words.push(`of ${typeText(schema.additionalProperties)}${schema.maxProperties !== undefined ? `, ≤ ${schema.maxProperties} keys` : ''}`);
    }
    return words.filter(Boolean).join(' ');
  }).join(' or ');
}

interface FieldRow {
  path: string;
  type: string;
  required: boolean;
  description: string;
}

/**
 * The fields of an object schema, nested ones as dotted paths (`estimate.lowMicroUsd`, array
 * items as `findings[].rule`); a field that is one of several objects lists each one's fields.
 * Named schemas are linked, not repeated.
 */
function fieldRows(schema: Schema, prefix = ''): FieldRow[] {
  const rows: FieldRow[] = [];
  const required = new Set(schema.required ?? []);
  for (const [name, field] of Object.entries(schema.properties ?? {})) {
    const path = `${prefix}${name}`;
    const description = [field.description, field.default !== undefined ? `Default ${code(field.default)}.` : '']
      .filter(Boolean).join(' ');
    rows.push({ path, type: typeText(field), required: required.has(name), description });
    rows.push(...nestedRows(field, path));
  }
  return rows;
}

function nestedRows(field: Schema, path: string): FieldRow[] {
  if (field.$ref) return [];
  const union = field.anyOf ?? field.oneOf;
  if (union) return union.flatMap((branch) => nestedRows(branch, path));
  if (field.properties) return fieldRows(field, `${path}.`);
  if (field.items) return nestedRows(field.items, `${path}[]`);
  return [];
}

const SCOPE_TEXT = (operation: Operation) => {
  const scopes = operation['x-scopes'];
  if (scopes) return `scope ${scopes.map(code).join(', ')}`;
  return (operation.security ?? []).length === 0 ? 'the signed URL is the credential' : 'public (a key that is sent is checked)';
};

/** Headers every response carries (rate-limited routes' ones X-RateLimit-*); an operation lists only its own. */
const COMMON_HEADERS = new Set(['X-Request-Id', 'Service-Version', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']);

function bodyText(content: Record<string, { schema: Schema }> | undefined): string {
  if (!content) return 'none';
  return Object.entries(content).map(([type, { schema }]) => (type === 'application/json' ? typeText(schema) : `\`${type}\``)).join(', ');
}

function operationSection(method: string, path: string, operation: Operation, head: boolean): string {
  const lines = [`#### \`${method.toUpperCase()} ${path}\``, '', `${operation.summary}. ${capitalized(SCOPE_TEXT(operation))}.${head ? ' HEAD answers the same headers without a body.' : ''}`];
  if (operation.parameters?.length) {
    lines.push('', markdownTable(['parameter', 'in', 'type', 'required', 'meaning'], operation.parameters.map((p) => [
      `\`${p.name}\``, p.in, typeText(p.schema), p.required ? 'yes' : 'no',
      [p.description ?? p.schema.description, p.schema.default !== undefined ? `Default ${code(p.schema.default)}.` : ''].filter(Boolean).join(' '),
    ])));
  }
  if (operation.requestBody) lines.push('', `Body${operation.requestBody.required ? '' : ' (optional)'}: ${bodyText(operation.requestBody.content)}.`);
  const rows: string[][] = [];
  const errors: string[] = [];
  for (const [status, response] of Object.entries(operation.responses)) {
    const codes = response['x-error-codes'];
    const headers = Object.keys(response.headers ?? {}).filter((h) => !COMMON_HEADERS.has(h)).map(code).join(', ');
    if (codes) errors.push(`${status} ${codes.map(code).join(', ')}`);
    else rows.push([status, response.description, bodyText(response.content), headers]);
  }
  lines.push('', markdownTable(['status', 'meaning', 'body', 'headers of its own'], rows), '', `Errors (the [error envelope](#error)): ${errors.join('; ')}.`);
  return lines.join('\n');
}

const capitalized = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/** The generated part of docs/API.md. */
export function apiReference(document: ApiDocument): string {
  const out: string[] = [
    `Service version \`${document.info.version}\`.`,
    '',
    '### Response headers',
    '',
    markdownTable(['header', 'type', 'meaning'], Object.entries(document.components.headers).map(([name, header]) => [`\`${name}\``, typeText(header.schema), header.description])),
    '',
    '### Operations',
  ];
  for (const tag of document.tags) {
    const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods).filter(([method, op]) => method !== 'head' && op.tags.includes(tag.name)).map(([method, op]) => ({ path, method, op, head: method === 'get' && 'head' in methods })));
    if (operations.length === 0) continue;
    out.push('', `**${tag.name}**: ${tag.description}.`);
    for (const { path, method, op, head } of operations) out.push('', operationSection(method, path, op, head));
  }
  out.push('', '### Schemas');
  for (const [name, schema] of Object.entries(document.components.schemas)) {
    if (name.startsWith('__')) continue;
    out.push('', `#### ${name}`, '');
    const rows = fieldRows(schema);
    out.push(rows.length === 0 ? typeText(schema) : markdownTable(['field', 'type', 'required', 'meaning'], rows.map((r) => [`\`${r.path}\``, r.type, r.required ? 'yes' : 'no', r.description])));
  }
  return out.join('\n');
}

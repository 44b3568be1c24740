import { z } from 'zod';
import type { SettingDoc } from '@gpufarm/shared';

/** One row of a configuration table: what the schema says of a setting, and its doc entry. */
export interface SettingRow {
  key: string;
  type: string;
  default: string;
  description: string;
}

/** A table cell: one line, pipes escaped. */
const cell = (text: string) => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
const code = (value: unknown) => `\`${String(value)}\``;

interface JsonSchemaField {
  type?: string | string[];
  enum?: unknown[];
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  default?: unknown;
  anyOf?: JsonSchemaField[];
}

/** A nullable setting (`anyOf` with null) as its non-null branch: unset is how null is written. */
function notNull(field: JsonSchemaField): JsonSchemaField {
  if (!field.anyOf) return field;
  const branches = field.anyOf.filter((b) => b.type !== 'null');
  if (branches.length !== 1) throw new Error(`a setting of several types the table cannot show: ${JSON.stringify(field)}`);
  return { ...branches[0], default: field.default };
}

/** The type and range a setting accepts, as its input (the environment's or the file's text) is checked. */
function typeOf(field: JsonSchemaField): string {
  if (field.enum) {
    const values = field.enum.map(String);
    if ([...values].sort().join() === '0,1,false,true') return 'boolean (`true`, `false`, `1`, `0`)';
    return values.map(code).join(', ');
  }
  const type = (Array.isArray(field.type) ? field.type.filter((t) => t !== 'null') : [field.type])[0];
  if (type === 'integer' || type === 'number') {
    const max = field.maximum !== undefined && field.maximum < Number.MAX_SAFE_INTEGER ? field.maximum : undefined;
    const min = field.minimum ?? (field.exclusiveMinimum !== undefined && type === 'integer' ? field.exclusiveMinimum + 1 : undefined);
    const range = min !== undefined && max !== undefined ? ` ${min}–${max}` : min !== undefined ? ` ≥ ${min}` : max !== undefined ? ` ≤ ${max}` : '';
    return `${type}${range}`;
  }
  if (type === 'string') {
    if (field.format === 'uri') return 'URL';
    if (field.pattern) return `string matching ${code(field.pattern)}`;
    const length = field.minLength !== undefined && field.minLength > 1 ? `${field.minLength}` : '';
    const upTo = field.maxLength !== undefined ? `${length || '1'}–${field.maxLength}` : length ? `≥ ${length}` : '';
    return upTo ? `string of ${upTo} characters` : 'string';
  }
  return type ?? 'any';
}

/** The default as the schema gives it: its input default, else what it parses `undefined` to. */
function defaultOf(schema: z.ZodType, field: JsonSchemaField): string {
  const value = field.default !== undefined ? field.default : (() => {
    const parsed = schema.safeParse(undefined);
    return parsed.success ? parsed.data : undefined;
  })();
  if (value === undefined || value === null) return 'unset';
  if (value === '' || (Array.isArray(value) && value.length === 0)) return 'empty';
  if (typeof value === 'object') throw new Error(`a default the table cannot show: ${JSON.stringify(value)}`);
  return code(value);
}

/**
 * The rows of an object schema's settings, in the schema's order. Throws when a setting has no
 * doc entry, or an entry names no setting: the page is only written when both agree.
 */
export function settingRows(schema: z.ZodObject, docs: Readonly<Record<string, SettingDoc>>): SettingRow[] {
  const keys = Object.keys(schema.shape);
  const missing = keys.filter((k) => !(k in docs));
  const extra = Object.keys(docs).filter((k) => !keys.includes(k));
  if (missing.length > 0 || extra.length > 0) {
    throw new Error([...missing.map((k) => `${k} has no doc entry`), ...extra.map((k) => `the doc entry ${k} names no setting`)].join('; '));
  }
  return keys.map((key) => {
    const fieldSchema = schema.shape[key] as z.ZodType;
    const field = notNull(z.toJSONSchema(fieldSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchemaField);
    const doc = docs[key]!;
    return { key, type: typeOf(field), default: doc.default ?? defaultOf(fieldSchema, field), description: doc.description };
  });
}

/** A markdown table: `header` names the columns, `cells` makes each row's. */
export function markdownTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`)].join('\n');
}

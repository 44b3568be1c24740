import { readFileSync } from 'node:fs';
import t from 'tap';
import { ApiError, ERROR_CODES, errorCodes, errorText, EXTENSION_CODES, errorForField, fieldDetail, GpufarmError } from '../src/errors.js';

// The spec lives beside the repository (../shared/spec), as in every checkout and in CI.
const SPEC = new URL('../../../shared/spec/public-api.md', import.meta.url);

function specErrorTable(): Map<string, number> {
  const text = readFileSync(SPEC, 'utf8');
  const section = text.slice(text.indexOf('| Code | HTTP | When |'));
  const rows = new Map<string, number>();
  for (const line of section.split('\n').slice(2)) {
    const match = /^\|\s*([a-z_]+)\s*\|\s*(\d{3})\s*\|/.exec(line);
    if (!match) break;
    rows.set(match[1]!, Number(match[2]));
  }
  return rows;
}

t.test('the error table matches the spec, code for code and status for status', async (t) => {
  const spec = specErrorTable();
  t.ok(spec.size >= 19, `the spec table was found (${spec.size} rows)`);
  const ours = errorCodes.filter((code) => !EXTENSION_CODES.includes(code));
  t.same(new Map(ours.map((code) => [code, ERROR_CODES[code].status])), spec);
  for (const code of EXTENSION_CODES) t.notOk(spec.has(code), `${code} is ours, not the spec's`);
});

t.test('ApiError carries the code, status, details and cause', async (t) => {
  const cause = new Error('boom');
  const err = new ApiError('validation_error', 'gpu.count must be from 1 to 16', { details: [{ field: 'gpu.count', message: 'x' }], cause });
  t.equal(err.status, 422);
  t.equal(err.code, 'validation_error');
  t.same(err.details, [{ field: 'gpu.count', message: 'x' }]);
  t.equal(err.cause, cause);
  t.equal(new ApiError('gone').message, ERROR_CODES.gone.message, 'default message from the table');
});

t.test('fieldDetail: the field labels its problem, or starts the sentence with subject', async (t) => {
  t.same(fieldDetail('cursor', 'malformed'), { field: 'cursor', message: 'cursor: malformed' });
  t.same(fieldDetail('status', 'is RUNNING', { subject: true }), { field: 'status', message: 'status is RUNNING' });
});

t.test('errorForField: one field error whose message is its detail', async (t) => {
  const err = errorForField('invalid_request', 'farm', 'must be a slug');
  t.type(err, GpufarmError);
  t.equal(err.code, 'invalid_request');
  t.equal(err.message, 'farm: must be a slug');
  t.same(err.details, [{ field: 'farm', message: 'farm: must be a slug' }]);
  t.equal(errorForField('validation_error', 'a.__proto__', 'is not allowed', { subject: true }).message, 'a.__proto__ is not allowed');
});

t.test('errorText: an Error is its message, anything else thrown is its string', async (t) => {
  t.equal(errorText(new GpufarmError('x', 'the disk is full')), 'the disk is full');
  t.equal(errorText(new TypeError('not a function')), 'not a function');
  t.equal(errorText('a thrown string'), 'a thrown string');
  t.equal(errorText(42), '42');
  t.equal(errorText(undefined), 'undefined');
});

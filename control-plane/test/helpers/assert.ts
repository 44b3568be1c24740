import { errorEnvelopeSchema, SERVICE_VERSION, type ErrorCode } from '@gpufarm/shared';
import type { LightMyRequestResponse } from 'fastify';
import type { Test } from 'tap';

/** Every error answer: the status, the envelope, a req_ id equal to the header's, the version. */
export function assertError(t: Test, res: LightMyRequestResponse, code: ErrorCode, status: number): void {
  t.equal(res.statusCode, status, `status ${status} for ${code}`);
  const body = errorEnvelopeSchema.parse(res.json());
  t.equal(body.error.code, code);
  t.match(body.error.requestId, /^req_[A-Za-z0-9._:-]+$/);
  t.equal(res.headers['x-request-id'], body.error.requestId, 'X-Request-Id header equals the body requestId');
  t.equal(res.headers['service-version'], SERVICE_VERSION);
  t.notMatch(res.body, /at .*\.(ts|js):\d+/, 'no stack trace');
  t.ok(Array.isArray(body.error.details));
}

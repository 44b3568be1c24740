import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { createFarmEnrollmentToken, ENROLLMENT_TOKEN_TTL_SECONDS, revokeFarmEnrollmentToken } from '../farms/enrollment-tokens.js';
import { listEnrollmentTokens } from '../farms/store.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { parseBody, parseParams, parseQuery } from '../http/parse.js';
import { actorOf, farmSlug, farmsOf, idCursor, ids, listQuery, priceField, scope, usdPrice, type OperatorRouteDeps } from './request.js';
import { tokenView } from './views.js';

const tokenParams = z.object({ id: z.string().regex(/^enrt_[0-9a-z]{26}$/, 'is not an enrollment token id') });
const createTokenBody = z.strictObject({
  farm: farmSlug,
  regionKey: z.string().min(1).max(64),
  pricePerGpuHour: usdPrice,
  label: z.string().min(1).max(100).nullable().optional(),
  ttlSeconds: z.int().min(60).max(30 * 86_400).optional(),
});

/** The farms' enrollment tokens: listed, created (the token shown once, with the command that spends it), revoked. */
export function tokenRoutes(app: FastifyInstance, { db, config, base, session }: OperatorRouteDeps): void {
  app.get(`${base}/enrollment-tokens`, session, async (request) => {
    const query = parseQuery(listQuery, request.query, 'GET /operator/api/enrollment-tokens');
    const before = query.cursor ? decodeCursor(query.cursor, idCursor).id : null;
    const rows = await listEnrollmentTokens(db, { farmIds: ids(scope(request, query.farm)), beforeId: before, limit: query.limit + 1 });
    const page = rows.slice(0, query.limit);
    return { data: page.map(tokenView), nextCursor: rows.length > query.limit ? encodeCursor({ id: page.at(-1)!.id }) : null };
  });

  app.post(`${base}/enrollment-tokens`, session, async (request, reply) => {
    const body = parseBody(createTokenBody, request.body);
    const [farm] = scope(request, body.farm);
    const { token, row } = await createFarmEnrollmentToken(db, {
      farm: farm!,
      regionKey: body.regionKey,
      pricePerGpuHourMicroUsd: priceField(body.pricePerGpuHour),
      label: body.label ?? null,
      ttlSeconds: body.ttlSeconds ?? ENROLLMENT_TOKEN_TTL_SECONDS,
      actor: actorOf(request),
    });
    return reply.code(201).send({ token, enrollmentToken: tokenView(row), command: `gf-agent enroll --server ${config.publicUrl} --token ${token}` });
  });

  app.post(`${base}/enrollment-tokens/:id/revoke`, session, async (request) => {
    const { id } = parseParams(tokenParams, request.params);
    return tokenView(await revokeFarmEnrollmentToken(db, { farmIds: ids(farmsOf(request)), id, actor: actorOf(request) }));
  });
}

import { ApiError, BUILT_IN_TEMPLATE_NAMES, builtInTemplates, fieldDetail, parseTemplateSave, TEMPLATE_LIMITS, templateNameSchema, type JobTemplate } from '@gpufarm/shared';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { parseParams } from '../http/parse.js';
import { deleteTemplate, findTemplate, listTemplates, saveTemplate, type TemplateRow } from './store.js';

/** `/v1/templates/:name`: a malformed name is a 400 naming `name`, never a lookup. */
export const templateParams = z.strictObject({ name: templateNameSchema.describe('The template name') });

function toTemplate(row: TemplateRow): JobTemplate {
  return { object: 'job_template', name: row.name, description: row.description, source: 'account', spec: row.spec, createdAt: row.created_at.toISOString(), updatedAt: row.updated_at.toISOString() };
}

const accountOf = (request: FastifyRequest): string => {
  if (!request.principal) throw new Error('a template route was reached without a principal');
  return request.principal.accountId;
};

/** A built-in name in a write: they are the same for every account and cannot be changed. */
function refuseBuiltIn(name: string): void {
  if (BUILT_IN_TEMPLATE_NAMES.includes(name)) {
    throw new ApiError('conflict', `"${name}" is a built-in template: save yours under another name.`, { details: [fieldDetail('name', 'is the name of a built-in template', { subject: true })] });
  }
}

/**
 * Job templates: `GET /v1/templates` [jobs:read] (the built-ins this deployment can run, then the
 * account's own), `GET /v1/templates/:name` [jobs:read], `PUT /v1/templates/:name` [jobs:create]
 * (save: 201 new, 200 replaced; `If-None-Match: *` makes it create-only, 409 when the name is
 * taken) and `DELETE /v1/templates/:name` [jobs:create]. A built-in and an own template never
 * share a name.
 */
export const templateRoutes: FastifyPluginAsync<{ db: Database; config: Pick<Config, 'execution'> }> = async (app, { db, config }) => {
  const builtIns = (): JobTemplate[] => {
    const canary = config.execution.canaryImage;
    return builtInTemplates({ canary: canary ? `${canary.repository}@${canary.digest}` : null, shell: config.execution.shellImage });
  };

  app.get('/v1/templates', { config: { auth: 'jobs:read' } }, async (request) => ({
    object: 'list',
    data: [...builtIns(), ...(await listTemplates(db, accountOf(request))).map(toTemplate)],
    nextCursor: null,
  }));

  app.get('/v1/templates/:name', { config: { auth: 'jobs:read' } }, async (request) => {
    const { name } = parseParams(templateParams, request.params);
    const builtIn = builtIns().find((t) => t.name === name);
    if (builtIn) return builtIn;
    const row = await findTemplate(db, accountOf(request), name);
    if (!row) throw new ApiError('not_found', `No template ${name}: GET /v1/templates lists the built-in ones and yours.`);
    return toTemplate(row);
  });

  app.put('/v1/templates/:name', { config: { auth: 'jobs:create' } }, async (request, reply) => {
    const name = (request.params as { name?: unknown }).name;
    const parsed = parseTemplateSave(name, request.body);
    if (!parsed.ok) throw new ApiError(parsed.code, parsed.details.map((d) => d.message).join('; '), { details: parsed.details });
    refuseBuiltIn(parsed.value.name);
    const condition = request.headers['if-none-match'];
    if (condition !== undefined && condition !== '*') {
      throw new ApiError('invalid_request', 'If-None-Match takes only "*" here (save only when no template has the name).', { details: [fieldDetail('If-None-Match', 'must be "*"', { subject: true })] });
    }
    const saved = await saveTemplate(db, { accountId: accountOf(request), ...parsed.value, createOnly: condition === '*', maxPerAccount: TEMPLATE_LIMITS.perAccount });
    if (saved.kind === 'taken') {
      throw new ApiError('conflict', `You already have a template named ${parsed.value.name}: replace it (send without If-None-Match) or pick another name.`, { details: [fieldDetail('name', 'is taken by another of your templates', { subject: true })] });
    }
    if (saved.kind === 'full') {
      throw new ApiError('conflict', `You have ${TEMPLATE_LIMITS.perAccount} templates, the most an account keeps: delete one first.`, { details: [fieldDetail('name', `would be template ${TEMPLATE_LIMITS.perAccount + 1}; the limit is ${TEMPLATE_LIMITS.perAccount}`, { subject: true })] });
    }
    return reply.code(saved.kind === 'created' ? 201 : 200).send(toTemplate(saved.row));
  });

  app.delete('/v1/templates/:name', { config: { auth: 'jobs:create' } }, async (request, reply) => {
    const { name } = parseParams(templateParams, request.params);
    refuseBuiltIn(name);
    if (!(await deleteTemplate(db, accountOf(request), name))) throw new ApiError('not_found', `No template ${name} of yours.`);
    return reply.code(204).send();
  });
};

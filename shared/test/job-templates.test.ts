import t from 'tap';
import { parseJobCreateRequest } from '../src/schemas/job-create.js';
import { BUILT_IN_TEMPLATE_NAMES, builtInTemplates, jobTemplateSchema, templateNameSchema } from '../src/templates/job-templates.js';
import { parseTemplateSave } from '../src/templates/template-save.js';

const CANARY = `127.0.0.1:5000/gpufarm/canary@sha256:${'c'.repeat(64)}`;
const SHELL = `127.0.0.1:5000/gpufarm/busybox@sha256:${'b'.repeat(64)}`;

t.test('behavior: every built-in template is a job spec the API accepts, on the image of its kind', async (t) => {
  const all = builtInTemplates({ canary: CANARY, shell: SHELL });
  t.same(all.map((x) => x.name), BUILT_IN_TEMPLATE_NAMES, 'all offered when the deployment has both images');
  for (const template of all) {
    t.ok(jobTemplateSchema.safeParse(template).success, `${template.name} is a template resource`);
    const parsed = parseJobCreateRequest(template.spec);
    t.ok(parsed.ok, `${template.name}: ${parsed.ok ? 'valid' : JSON.stringify(parsed.details)}`);
    t.ok(templateNameSchema.safeParse(template.name).success, `${template.name} is a valid name`);
  }
  const canary = all.find((x) => x.name === 'canary')!;
  t.match(canary.spec, { image: CANARY, command: ['sha256-chain', '100000'], deterministic: true }, 'the canary runs sha256-chain in the canary image, deterministic');
  for (const shell of all.filter((x) => x.name !== 'canary')) {
    t.equal(shell.spec.image, SHELL, `${shell.name} runs the shell image`);
    t.match((shell.spec.command as string[])[2], /\/output\//, `${shell.name} writes under /output`);
  }
});

t.test('behavior: templates whose image the deployment lacks are not offered', async (t) => {
  t.same(builtInTemplates({ canary: CANARY, shell: null }).map((x) => x.name), ['canary']);
  t.same(builtInTemplates({ canary: null, shell: SHELL }).map((x) => x.name), ['shell-script', 'machine-report', 'progress-loop']);
  t.same(builtInTemplates({ canary: null, shell: null }), []);
});

t.test('error: a bad save names the field; only a bad spec is a validation error', async (t) => {
  const spec = { image: 'busybox', gpu: { count: 1 } };
  t.match(parseTemplateSave('my-job', { spec, description: '  trained nightly  ' }), { ok: true, value: { name: 'my-job', description: 'trained nightly', spec } }, 'a description is trimmed');
  t.match(parseTemplateSave('my-job', { spec, description: '   ' }), { ok: true, value: { description: null } }, 'a blank description is none');
  const cases: Array<[unknown, unknown, string, string[]]> = [
    ['My Job', { spec }, 'invalid_request', ['name']],
    ['', { spec }, 'invalid_request', ['name']],
    ['a'.repeat(65), { spec }, 'invalid_request', ['name']],
    ['-x', { spec }, 'invalid_request', ['name']],
    ['ok', { spec, description: 'x'.repeat(501) }, 'invalid_request', ['description']],
    ['ok', { spec, extra: 1 }, 'invalid_request', ['extra']],
    ['ok', {}, 'invalid_request', ['spec']],
    ['ok', 'text', 'invalid_request', ['body']],
    ['ok', { spec: { image: 'busybox', gpu: { count: 99 } } }, 'validation_error', ['spec.gpu.count']],
    ['ok', { spec: { image: 'busybox', gpu: { count: 1 }, env: { API_KEY: 'x' } } }, 'validation_error', ['spec.env.API_KEY']],
    ['BAD', { spec: { image: 'busybox', gpu: { count: 0 } } }, 'invalid_request', ['name', 'spec.gpu.count']],
  ];
  for (const [name, body, code, fields] of cases) {
    const parsed = parseTemplateSave(name, body);
    if (parsed.ok) {
      t.fail(`${JSON.stringify(name)} ${JSON.stringify(body)} was accepted`);
      continue;
    }
    t.equal(parsed.code, code, `${JSON.stringify(name)}: ${code}`);
    t.same(parsed.details.map((d) => d.field), fields, `names ${fields.join(', ')}`);
    for (const d of parsed.details) t.ok(d.message.startsWith(d.field), `the message starts with its field: ${d.message}`);
  }
});

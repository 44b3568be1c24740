import { jobCreatedSchema, jobTemplateListSchema } from '@gpufarm/shared';
import t from 'tap';
import { buildTestApp, createTestKey } from '@gpufarm/control-plane/testing/app';
import { createFarm, createMachine } from '@gpufarm/control-plane/testing';
import { createClient } from '../src/index.js';
import { failure, listening } from './helpers/control-plane.js';
import { gf, gfHome } from './helpers/gf.js';

// Each case spawns gf as a fresh process: minutes when other test files share the cores.
t.setTimeout(300_000);
const CANARY_IMAGE = `127.0.0.1:5000/gpufarm/canary@sha256:${'c'.repeat(64)}`;
const SHELL_IMAGE = `127.0.0.1:5000/gpufarm/busybox@sha256:${'b'.repeat(64)}`;
const MINE = { title: 'mine', image: 'ghcr.io/acme/train:2', command: ['python', 'train.py'], gpu: { count: 1 }, maxPricePerGpuHour: '2' };

t.test('behavior: the SDK saves templates; gf templates lists them; gf run --template creates a job from a built-in or an own one', async (t) => {
  const s = await listening((env) => buildTestApp(t, { env: { ...env, GF_CANARY_IMAGE: CANARY_IMAGE, GF_SHELL_IMAGE: SHELL_IMAGE } }));
  const farm = await createFarm(s.db, { slug: 'tpl-cli-farm' });
  await createMachine(s.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 450_000 });
  await s.offerIndex.refresh();
  const { key } = await createTestKey(s.db);
  const sdk = createClient({ baseUrl: s.baseUrl, apiKey: key });

  const saved = await sdk.templates.save('my-train', { spec: MINE, description: 'train v2\nnightly' });
  t.match(saved, { name: 'my-train', source: 'account', description: 'train v2\nnightly', spec: MINE });
  const taken = await failure(sdk.templates.save('my-train', { spec: MINE }, { createOnly: true }));
  t.equal(taken.code, 'conflict', 'createOnly: a taken name is a conflict');
  t.same(taken.details.map((d) => d.field), ['name']);
  const bad = await failure(sdk.templates.save('my-train', { spec: { ...MINE, gpu: { count: 0 } } }));
  t.equal(bad.code, 'validation_error');
  t.same(bad.details.map((d) => d.field), ['spec.gpu.count'], 'a bad spec names its field');
  await sdk.templates.save('gone', { spec: MINE });
  await sdk.templates.delete('gone');
  t.equal((await failure(sdk.templates.get('gone'))).code, 'not_found', 'deleted');

  const home = gfHome(t);
  const env = { ...home.env, GF_ENDPOINT: s.baseUrl, GF_API_KEY: key };
  const table = await gf(['templates'], { env });
  t.equal(table.code, 0, table.stderr);
  t.match(table.stdout, /^NAME\s+SOURCE\s+IMAGE\s+COMMAND\s+DESCRIPTION/);
  t.match(table.stdout, /\ncanary\s+built-in\s+127\.0\.0\.1:5000\/gpufarm\/canary@sha256:c+…?\s+sha256-chain 100000\s+The service’s canary/);
  t.match(table.stdout, /\nmy-train\s+yours\s+ghcr\.io\/acme\/train:2\s+python train\.py\s+train v2 nightly\n/, 'its own, on one line');
  t.match(table.stdout, /run one with: gf run --template NAME/);
  const json = await gf(['templates', '--json'], { env });
  t.same(jobTemplateListSchema.parse(JSON.parse(json.stdout)).data.map((x) => x.name), ['canary', 'shell-script', 'machine-report', 'progress-loop', 'my-train'], '--json is the API list');

  const canary = await gf(['run', '--template', 'canary', '--json'], { env });
  t.equal(canary.code, 0, canary.stderr);
  const created = jobCreatedSchema.parse(JSON.parse(canary.stdout));
  const [stored] = await s.db.query<{ spec: Record<string, unknown> }>('SELECT spec FROM jobs WHERE id = $1', [created.job.id]);
  t.match(stored?.spec, { image: CANARY_IMAGE, command: ['sha256-chain', '100000'], deterministic: true }, 'the built-in canary, in the deployment’s canary image');
  t.equal(created.job.status, 'CREATED');
  const own = await gf(['run', '--template', 'my-train'], { env });
  t.equal(own.code, 0, own.stderr);
  t.match(own.stderr, /using your template my-train: ghcr\.io\/acme\/train:2/);
  t.match(own.stdout, /Fund it from/);
  const titles = await s.db.query<{ title: string }>('SELECT title FROM jobs ORDER BY created_at');
  t.same(titles.map((r) => r.title), ['canary', 'mine'], 'both jobs were created from the templates');

  const missing = await gf(['run', '--template', 'nosuch'], { env });
  t.equal(missing.code, 3, 'an unknown template is the API’s not_found');
  t.match(missing.stderr, /not_found \(HTTP 404\): No template nosuch/);
});

t.test('error: gf run needs one of -f and --template, and a template name of the right form', async (t) => {
  const home = gfHome(t);
  const env = { ...home.env, GF_ENDPOINT: 'http://127.0.0.1:9' };
  const cases: [string[], RegExp][] = [
    [['run'], /Say what to run: -f FILE or --template NAME/],
    [['run', '-f', 'job.yaml', '--template', 'canary'], /-f and --template cannot be combined/],
    [['run', '--template', 'Not A Name'], /--template: must be 1 to 64 lower-case letters/],
  ];
  for (const [args, message] of cases) {
    const r = await gf(args, { env });
    t.equal(r.code, 2, `gf ${args.join(' ')} exits 2`);
    t.match(r.stderr, message);
    t.equal(r.stdout, '');
  }
});

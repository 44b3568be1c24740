import { z } from 'zod';
import { fieldError, isoTimeSchema, listEnvelopeSchema } from '../schemas/common.js';
import type { JobCreateRequest } from '../schemas/job-create.js';

/**
 * Job templates: a named job spec to start from (the New job form, `gf run --template NAME`).
 * Built-in ones are defined here, once; an account's own are saved through `PUT /v1/templates/:name`
 * and checked by the same job-create schema as `POST /v1/jobs`.
 */

export const TEMPLATE_LIMITS = {
  nameMaxChars: 64,
  descriptionMaxChars: 500,
  /** Ours: a list a person reads in a picker, not a store of specs. */
  perAccount: 100,
} as const;

/** Lower case so `gf run --template Canary` and `canary` cannot name two templates; safe in a URL path and a shell. */
const TEMPLATE_NAME = new RegExp(`^[a-z0-9][a-z0-9._-]{0,${TEMPLATE_LIMITS.nameMaxChars - 1}}$`);
export const TEMPLATE_NAME_MESSAGE = `must be 1 to ${TEMPLATE_LIMITS.nameMaxChars} lower-case letters, digits, ".", "_" or "-", starting with a letter or digit`;

export const templateNameSchema = z.string(fieldError(TEMPLATE_NAME_MESSAGE)).regex(TEMPLATE_NAME, fieldError(TEMPLATE_NAME_MESSAGE));

export const TEMPLATE_SOURCES = ['built_in', 'account'] as const;

/**
 * A template as the API answers it. `spec` is the job spec as it was saved (valid under the
 * job-create schema then; a later, stricter rule is reported when a job is created from it),
 * so it is read as a JSON object here. Built-in templates have no times.
 */
export const jobTemplateSchema = z.strictObject({
  object: z.literal('job_template'),
  name: z.string(),
  description: z.string().nullable(),
  source: z.enum(TEMPLATE_SOURCES),
  spec: z.record(z.string(), z.unknown()),
  createdAt: isoTimeSchema.nullable(),
  updatedAt: isoTimeSchema.nullable(),
});
export type JobTemplate = z.infer<typeof jobTemplateSchema>;

/** `GET /v1/templates`: the built-in templates this deployment can run, then the account's own by name; one page. */
export const jobTemplateListSchema = listEnvelopeSchema(jobTemplateSchema);
export type JobTemplateList = z.infer<typeof jobTemplateListSchema>;

// ---------------------------------------------------------------------------------------------
// Built-in templates
// ---------------------------------------------------------------------------------------------

/**
 * The images built-in templates run, as the deployment names them (pinned by digest): `canary`
 * is the service's canary image (`GF_CANARY_IMAGE`), `shell` a small image with a POSIX shell and
 * the usual tools (`GF_SHELL_IMAGE`; locally the busybox image). null: the deployment has none,
 * and the templates needing it are not offered.
 */
export interface TemplateImages {
  canary: string | null;
  shell: string | null;
}

interface BuiltInTemplate {
  name: string;
  description: string;
  image: keyof TemplateImages;
  spec: Omit<JobCreateRequest, 'image'>;
}

/** Scripts of the shell templates; each writes its result under /output, the default output rule. */
const SHELL_SCRIPT = [
  'echo "running on $(hostname) with $(nproc) CPUs"',
  'echo "hello from gpufarm" > /output/hello.txt',
  'date -u > /output/finished-at.txt',
  'echo "wrote /output/hello.txt and /output/finished-at.txt"',
].join('\n');

const MACHINE_REPORT_SCRIPT = [
  '{',
  '  echo "kernel: $(uname -srm)"',
  '  echo "cpus: $(nproc)"',
  '  free -m',
  '  df -h /output',
  '  echo "NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES:-unset}"',
  '  ls /dev | grep -i nvidia || echo "no /dev/nvidia* devices in the container"',
  '} | tee /output/machine.txt',
].join('\n');

const PROGRESS_STEPS = 30;
const PROGRESS_SCRIPT = [
  'i=1',
  `while [ $i -le ${PROGRESS_STEPS} ]; do`,
  `  echo "step $i of ${PROGRESS_STEPS}"`,
  '  echo "$i" > /output/checkpoint.txt',
  '  sleep 1',
  '  i=$((i+1))',
  'done',
  'echo done > /output/result.txt',
].join('\n');

const BUILT_INS: readonly BuiltInTemplate[] = [
  {
    name: 'canary',
    description: 'The service’s canary: 100,000 rounds of SHA-256 over the job id in the canary image, pinned by digest. The service recomputes the result, so the job can reach RESULT_VERIFIED.',
    image: 'canary',
    spec: { title: 'canary', command: ['sha256-chain', '100000'], workloadType: 'batch', gpu: { count: 1 }, maxRuntimeSeconds: 600, deterministic: true },
  },
  {
    name: 'shell-script',
    description: 'A shell script (sh -c) that prints where it runs and writes two files to /output, kept as the job’s output.',
    image: 'shell',
    spec: { title: 'shell script', command: ['sh', '-c', SHELL_SCRIPT], workloadType: 'batch', gpu: { count: 1 }, maxRuntimeSeconds: 600 },
  },
  {
    name: 'machine-report',
    description: 'Reports the machine the job got (kernel, CPUs, memory, disk, the GPU devices in the container) to the log and to /output/machine.txt.',
    image: 'shell',
    spec: { title: 'machine report', command: ['sh', '-c', MACHINE_REPORT_SCRIPT], workloadType: 'development', gpu: { count: 1 }, maxRuntimeSeconds: 300 },
  },
  {
    name: 'progress-loop',
    description: `A batch loop of ${PROGRESS_STEPS} one-second steps that logs its progress and keeps a checkpoint in /output: watch its lines arrive live.`,
    image: 'shell',
    spec: { title: 'progress loop', command: ['sh', '-c', PROGRESS_SCRIPT], workloadType: 'batch', gpu: { count: 1 }, maxRuntimeSeconds: 600 },
  },
];

/** Every built-in name, offered or not: an account cannot save a template under one (`gf run --template canary` means one thing). */
export const BUILT_IN_TEMPLATE_NAMES: readonly string[] = BUILT_INS.map((t) => t.name);

/** The built-in templates a deployment with `images` can run, each a full job spec. */
export function builtInTemplates(images: TemplateImages): JobTemplate[] {
  return BUILT_INS.flatMap((t) => {
    const image = images[t.image];
    if (image === null) return [];
    return [{ object: 'job_template' as const, name: t.name, description: t.description, source: 'built_in' as const, spec: { image, ...t.spec }, createdAt: null, updatedAt: null }];
  });
}

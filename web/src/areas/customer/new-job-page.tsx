import { GfError, type JobSpec } from '@gpufarm/client/browser';
import { BENCHMARK_TIERS, formatMicroUsd, JOB_SPEC_DEFAULTS, JOB_SPEC_LIMITS, jobCreateRequestSchema, maxCostMicroUsd, parseJobCreateRequest, parseUsdToMicroUsd, REGIONS, type CapacityOffer, type ErrorDetail, type JobCreateRequest, type JobTemplate } from '@gpufarm/shared';
import { useMutation, useQuery } from '@tanstack/react-query';
import { useMemo, useState, type FormEvent } from 'react';
import { Link, useLocation, useSearch } from 'wouter';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { sentence, usd } from '../../lib/format';
import { useSettled } from '../../lib/settled';
import { CopyButton } from '../../ui/copy-button';
import { FieldErrors, SelectField, TextArea, TextField } from '../../ui/fields';
import { Page } from '../../ui/page';
import { InputUploads, inputRowsOf, type InputRow } from './input-uploads';
import { SaveTemplate, TemplatePicker } from './job-templates';

/** What the form holds: text as typed, turned into a job spec by `specOf`. */
interface Draft {
  title: string;
  image: string;
  commandMode: 'image' | 'args' | 'script';
  args: string;
  script: string;
  gpuCount: string;
  gpuClass: string;
  minimumVramGb: string;
  maxPrice: string;
  runtimeMinutes: string;
  env: string;
  network: 'none' | 'allowlist';
  allow: string;
  outputPath: string;
  region: string;
  deterministic: boolean;
  paymentToken: 'eth' | 'stable';
  /** The output rule's size limit: the default, or a job's own when it is run again. */
  outputMaxBytes: number;
  /** Files uploaded as the job's inputs, or carried from a job run again. */
  inputs: InputRow[];
  /** Fields of a job run again that the form has no input for (CPU and RAM limits, more output rules…): sent as they were. */
  carried: Record<string, unknown>;
}

const EMPTY: Draft = {
  title: '',
  image: '',
  commandMode: 'script',
  args: '',
  script: '',
  gpuCount: '1',
  gpuClass: '',
  minimumVramGb: '',
  maxPrice: '',
  runtimeMinutes: String(JOB_SPEC_DEFAULTS.maxRuntimeSeconds / 60),
  env: '',
  network: 'none',
  allow: '',
  outputPath: JOB_SPEC_DEFAULTS.outputRules[0].path,
  region: '',
  deterministic: false,
  paymentToken: 'eth',
  outputMaxBytes: JOB_SPEC_DEFAULTS.outputRules[0].maxBytes,
  inputs: [],
  carried: {},
};

/** The spec fields the form's inputs stand for; the rest of a spec run again is carried as it was. */
const FORM_FIELDS = new Set(['title', 'image', 'imageDigest', 'command', 'gpu', 'maxPricePerGpuHour', 'maxPricePerGpuHourMicroUsd', 'maxRuntimeSeconds', 'env', 'networkPolicy', 'outputRules', 'regionPreference', 'deterministic', 'paymentToken', 'inputs']);

/** The form filled in from an earlier job's spec ("Run again"). */
export function draftOf(spec: JobCreateRequest): Draft {
  const command = spec.command ?? [];
  const script = command.length === 3 && command[0] === 'sh' && command[1] === '-c';
  const carried: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(spec)) if (!FORM_FIELDS.has(key) && value !== undefined) carried[key] = value;
  if (spec.gpu.minimumVramBytes !== undefined) carried.gpu = { minimumVramBytes: spec.gpu.minimumVramBytes };
  const [firstRule, ...moreRules] = spec.outputRules ?? [];
  if (moreRules.length > 0) carried.outputRules = moreRules;
  const price = spec.maxPricePerGpuHourMicroUsd !== undefined ? formatMicroUsd(spec.maxPricePerGpuHourMicroUsd) : spec.maxPricePerGpuHour !== undefined ? String(spec.maxPricePerGpuHour) : '';
  return {
    title: spec.title ?? '',
    image: spec.imageDigest && !spec.image.includes('@') ? `${spec.image}@${spec.imageDigest}` : spec.image,
    commandMode: command.length === 0 ? 'image' : script ? 'script' : 'args',
    args: script ? '' : command.join('\n'),
    script: script ? command[2]! : '',
    gpuCount: String(spec.gpu.count),
    gpuClass: spec.gpu.modelAllowlist?.length === 1 ? spec.gpu.modelAllowlist[0]! : '',
    minimumVramGb: spec.gpu.minimumVramGb !== undefined ? String(spec.gpu.minimumVramGb) : '',
    maxPrice: price,
    runtimeMinutes: String(Math.ceil((spec.maxRuntimeSeconds ?? JOB_SPEC_DEFAULTS.maxRuntimeSeconds) / 60)),
    env: Object.entries(spec.env ?? {})
      .map(([name, value]) => `${name}=${value}`)
      .join('\n'),
    network: spec.networkPolicy?.mode === 'allowlist' ? 'allowlist' : 'none',
    allow: spec.networkPolicy?.mode === 'allowlist' ? spec.networkPolicy.allow.join('\n') : '',
    outputPath: firstRule?.path ?? JOB_SPEC_DEFAULTS.outputRules[0].path,
    region: spec.regionPreference ?? '',
    deterministic: spec.deterministic ?? false,
    paymentToken: spec.paymentToken ?? 'eth',
    outputMaxBytes: firstRule?.maxBytes ?? JOB_SPEC_DEFAULTS.outputRules[0].maxBytes,
    inputs: inputRowsOf(spec.inputs),
    carried,
  };
}

/** The form's inputs; an error's `field` (the API's path) is shown at the input it belongs to. */
type InputName = 'title' | 'image' | 'inputs' | 'command' | 'gpuCount' | 'gpuClass' | 'minimumVramGb' | 'maxPrice' | 'runtime' | 'env' | 'network' | 'outputPath' | 'region' | 'paymentToken';

const FIELD_INPUTS: Array<[prefix: string, input: InputName]> = [
  ['title', 'title'],
  ['image', 'image'],
  ['command', 'command'],
  ['inputs', 'inputs'],
  ['gpu.count', 'gpuCount'],
  ['gpu.modelAllowlist', 'gpuClass'],
  ['gpu.minimumVram', 'minimumVramGb'],
  ['maxPricePerGpuHour', 'maxPrice'],
  ['maxRuntimeSeconds', 'runtime'],
  ['env', 'env'],
  ['networkPolicy', 'network'],
  ['outputRules', 'outputPath'],
  ['regionPreference', 'region'],
  ['paymentToken', 'paymentToken'],
];

function inputOf(field: string): InputName | null {
  for (const [prefix, input] of FIELD_INPUTS) if (field === prefix || field.startsWith(`${prefix}.`) || field.startsWith(`${prefix}[`)) return input;
  return null;
}

const lines = (text: string) => text.split('\n').map((l) => l.trim()).filter((l) => l !== '');

/**
 * The job spec the draft describes (the body of `POST /v1/jobs`, the file `gf run -f` reads),
 * with what cannot even be put into a spec (an environment line without `=`, a count that is
 * not a number) as errors of the API's own field names. Defaults are left out for the server to
 * apply, as the API does for every client.
 */
export function specOf(draft: Draft): { spec: JobSpec; errors: ErrorDetail[] } {
  const errors: ErrorDetail[] = [];
  const whole = (text: string, field: string, what: string): number | undefined => {
    if (!/^\d+$/.test(text.trim())) {
      errors.push({ field, message: `must be a whole number of ${what}` });
      return undefined;
    }
    return Number(text.trim());
  };
  const count = whole(draft.gpuCount, 'gpu.count', 'GPUs');
  const gpu: JobSpec['gpu'] = { ...(draft.carried.gpu as object | undefined), count: count ?? 1 };
  if (draft.minimumVramGb.trim()) {
    const vram = whole(draft.minimumVramGb, 'gpu.minimumVramGb', 'GB');
    if (vram !== undefined) gpu.minimumVramGb = vram;
  }
  if (draft.gpuClass) gpu.modelAllowlist = [draft.gpuClass];
  const { gpu: _carriedGpu, outputRules: moreRules, ...carried } = draft.carried;
  const spec: JobSpec = { ...(carried as Partial<JobSpec>), image: draft.image.trim(), gpu };
  if (draft.title.trim()) spec.title = draft.title.trim();
  if (draft.commandMode === 'args') spec.command = lines(draft.args);
  if (draft.commandMode === 'script') {
    if (!draft.script.trim()) errors.push({ field: 'command', message: 'write the script, or choose to run the image’s own command' });
    else spec.command = ['sh', '-c', draft.script];
  }
  const minutes = whole(draft.runtimeMinutes, 'maxRuntimeSeconds', 'minutes');
  if (minutes !== undefined) spec.maxRuntimeSeconds = minutes * 60;
  if (draft.maxPrice.trim()) spec.maxPricePerGpuHour = draft.maxPrice.trim();
  const env: Record<string, string> = {};
  for (const line of lines(draft.env)) {
    const at = line.indexOf('=');
    if (at <= 0) errors.push({ field: 'env', message: `"${line.slice(0, 40)}" is not NAME=value` });
    else env[line.slice(0, at)] = line.slice(at + 1);
  }
  if (Object.keys(env).length > 0) spec.env = env;
  if (draft.network === 'allowlist') spec.networkPolicy = { mode: 'allowlist', allow: lines(draft.allow) };
  const extraRules = Array.isArray(moreRules) ? (moreRules as NonNullable<JobSpec['outputRules']>) : [];
  if (draft.outputPath.trim() !== JOB_SPEC_DEFAULTS.outputRules[0].path || draft.outputMaxBytes !== JOB_SPEC_DEFAULTS.outputRules[0].maxBytes || extraRules.length > 0) {
    spec.outputRules = [{ path: draft.outputPath.trim(), maxBytes: draft.outputMaxBytes }, ...extraRules];
  }
  if (draft.inputs.length > 0) {
    if (draft.inputs.some((row) => row.error !== null)) errors.push({ field: 'inputs', message: 'an input was not uploaded: remove it, or add the file again' });
    else if (draft.inputs.some((row) => row.artifactId === null)) errors.push({ field: 'inputs', message: 'wait until every input is uploaded' });
    spec.inputs = draft.inputs.flatMap((row) => (row.artifactId ? [{ artifactId: row.artifactId, mountName: row.mountName.trim() }] : []));
  }
  if (draft.region) spec.regionPreference = draft.region;
  if (draft.deterministic) spec.deterministic = true;
  spec.paymentToken = draft.paymentToken;
  // Local errors first; the shared schema (the API's own) then checks what could be built.
  const checked = parseJobCreateRequest(spec);
  if (!checked.ok) for (const detail of checked.details) if (!errors.some((e) => e.field === detail.field)) errors.push(detail);
  return { spec, errors };
}

/** One class of GPU on the market now, from the live offers. */
interface ClassChoice {
  classId: string;
  label: string;
  vramBytes: number;
  available: number;
  /** Of `available`, those on machines that proved their GPUs. */
  provenAvailable: number;
  maxPerMachine: number;
  lowestPrice: number;
  /** The best benchmark tier offered (S best). */
  bestTier: (typeof BENCHMARK_TIERS)[number];
  regions: Set<string>;
}

function classChoices(offers: CapacityOffer[]): ClassChoice[] {
  const byClass = new Map<string, ClassChoice>();
  for (const offer of offers) {
    const seen = byClass.get(offer.gpu.classId) ?? {
      classId: offer.gpu.classId,
      label: offer.gpu.label,
      vramBytes: offer.gpu.vramBytes,
      available: 0,
      provenAvailable: 0,
      maxPerMachine: 0,
      lowestPrice: offer.price.perGpuHourMicroUsd,
      bestTier: offer.benchmarkTier,
      regions: new Set<string>(),
    };
    seen.available += offer.available;
    if (offer.proof.proven) seen.provenAvailable += offer.available;
    seen.maxPerMachine = Math.max(seen.maxPerMachine, offer.maxAvailablePerMachine);
    seen.lowestPrice = Math.min(seen.lowestPrice, offer.price.perGpuHourMicroUsd);
    if (BENCHMARK_TIERS.indexOf(offer.benchmarkTier) < BENCHMARK_TIERS.indexOf(seen.bestTier)) seen.bestTier = offer.benchmarkTier;
    seen.regions.add(offer.region.label);
    byClass.set(offer.gpu.classId, seen);
  }
  return [...byClass.values()].sort((a, b) => a.lowestPrice - b.lowestPrice);
}

/** A class as its option reads: price, availability (proven GPUs among them), best tier, where. */
function choiceText(c: ClassChoice): string {
  const where = c.regions.size === 1 ? [...c.regions][0]! : `${c.regions.size} regions`;
  return `${c.label}: from ${usd(c.lowestPrice)}/GPU-hour, ${c.available} available (${c.provenAvailable} proven), tier ${c.bestTier} at best, ${where}`;
}

/** A shell-quoted word for the copied curl line. */
const shellQuote = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`;

/**
 * New job: the spec as a form (the same shared schema as the API checks every field, errors at
 * the field), the live offers to pick a GPU class from, the most the job can cost, the spec as
 * JSON to copy (the file `gf run -f` reads, or a curl line); creating it opens its page, where
 * the wallet funds it.
 */
export default function NewJobPage() {
  const api = useApi();
  const { gf } = api;
  const [, navigate] = useLocation();
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [tried, setTried] = useState(false);
  // "Run again" opens this page with ?from=<job id>: that job's accepted spec fills the form once.
  const from = new URLSearchParams(useSearch()).get('from');
  const source = useQuery({ queryKey: ['job-timeline', from], queryFn: () => api.jobs.timeline(from!), enabled: from !== null, staleTime: Infinity });
  const [filledFrom, setFilledFrom] = useState<{ id: string; readable: boolean } | null>(null);
  if (from && source.data && filledFrom?.id !== from) {
    const parsed = jobCreateRequestSchema.safeParse(source.data.spec);
    setFilledFrom({ id: from, readable: parsed.success });
    if (parsed.success) setDraft(draftOf(parsed.data));
  }
  // A template picked on this page fills the form as "Run again" does; its notice replaces that one.
  const [fromTemplate, setFromTemplate] = useState<{ name: string; readable: boolean } | null>(null);
  const applyTemplate = (template: JobTemplate) => {
    const parsed = jobCreateRequestSchema.safeParse(template.spec);
    setFromTemplate({ name: template.name, readable: parsed.success });
    if (!parsed.success) return;
    setDraft(draftOf(parsed.data));
    setTried(false);
    create.reset();
  };
  const offers = useQuery({ queryKey: ['capacity', 'new-job'], queryFn: () => gf.capacity.list({ limit: 100 }), refetchInterval: 30_000 });
  const pricing = useQuery({ queryKey: ['pricing'], queryFn: () => gf.pricing(), staleTime: 300_000 });
  const { spec, errors } = useMemo(() => specOf(draft), [draft]);
  const create = useMutation({
    mutationFn: () => gf.jobs.create(spec),
    onSuccess: (created) => navigate(`/jobs/${encodeURIComponent(created.job.id)}`),
  });
  const serverErrors = create.error instanceof GfError ? create.error.details : [];
  const shown = tried ? [...errors, ...serverErrors.filter((s) => !errors.some((e) => e.field === s.field))] : [];
  // The shared schema's messages start with the field's path; the form's own say it from the input they sit under.
  const errorAt = (input: InputName) => shown.filter((e) => inputOf(e.field) === input).map((e) => e.message);
  const elsewhere = shown.filter((e) => inputOf(e.field) === null);
  const set = <K extends keyof Draft>(key: K) => (value: Draft[K]) => {
    setDraft((d) => ({ ...d, [key]: value }));
    if (create.isError) create.reset();
  };
  // Will it match: asked again when what decides it changes (GPUs, class, memory, cap, workload)
  // and has stayed so for a moment, once the spec is valid.
  const fitSpec = useSettled(errors.length === 0 ? spec : null, 400);
  const fitKey = fitSpec && { gpu: fitSpec.gpu, maxPricePerGpuHour: fitSpec.maxPricePerGpuHour, workloadType: fitSpec.workloadType };
  const fit = useQuery({ queryKey: ['spec-fit', fitKey], queryFn: () => api.jobs.specFit(fitSpec!), enabled: fitSpec !== null, staleTime: 10_000 });
  const choices = classChoices(offers.data?.data ?? []);
  const chosen = choices.find((c) => c.classId === draft.gpuClass);
  const json = JSON.stringify(spec, null, 2);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    setTried(true);
    if (errors.length === 0) create.mutate();
  };

  return (
    <Page title="New job" heading="New job" actions={<Link href="/jobs">Back to jobs</Link>}>
      <TemplatePicker onUse={applyTemplate} />
      {fromTemplate ? (
        <p className="notice" role="status">
          {fromTemplate.readable
            ? `Template ${fromTemplate.name}: the form holds its spec. Change what you need, then create the job.`
            : `The template ${fromTemplate.name} does not fit this form (its spec no longer passes the API's checks): fill in the form, or save a new template.`}
        </p>
      ) : from ? (
        <p className="notice" role="status">
          {source.isPending
            ? `Loading the spec of job ${from}…`
            : source.isError
              ? `The spec of job ${from} could not be loaded (${reasonOf(source.error)}): fill in the form, or go back to the job.`
              : filledFrom?.readable === false
                ? `The spec of job ${from} does not fit this form: fill it in, or use its JSON from the job page with gf run -f.`
                : `Run again: the form holds job ${from}'s spec. Change what you need; fields the form has no input for (CPU and RAM limits, more output rules) are sent as they were.`}
        </p>
      ) : null}
      <form className="new-job" onSubmit={submit} noValidate aria-label="New job">
        {tried && shown.length > 0 ? (
          <div className="error-state" role="alert">
            <p className="error-title">The job cannot be created as it is: {shown.length === 1 ? 'one field needs' : `${shown.length} fields need`} a change.</p>
            {elsewhere.length > 0 ? (
              <ul>
                {elsewhere.map((e) => (
                  <li key={e.field}>{e.message}</li>
                ))}
              </ul>
            ) : null}
          </div>
        ) : null}
        <section className="card" aria-labelledby="what-heading">
          <h2 id="what-heading">What to run</h2>
          <TextField label="Title" hint={`Optional, up to ${JOB_SPEC_LIMITS.titleMaxChars} characters.`} value={draft.title} onChange={set('title')} errors={errorAt('title')} />
          <TextField label="Image" hint="A container image the machine pulls, e.g. ghcr.io/you/job:1. Pin its exact bytes with @sha256:<digest>." value={draft.image} onChange={set('image')} errors={errorAt('image')} required />
          <fieldset className="field">
            <legend>Command</legend>
            {(
              [
                ['script', 'Shell script (sh -c)'],
                ['args', 'Arguments, one per line (no shell)'],
                ['image', 'The image’s own command'],
              ] as const
            ).map(([mode, label]) => (
              <label key={mode} className="check">
                <input type="radio" name="commandMode" checked={draft.commandMode === mode} onChange={() => set('commandMode')(mode)} />
                {label}
              </label>
            ))}
          </fieldset>
          {draft.commandMode === 'script' ? <TextArea label="Script" hint="Runs as sh -c. Write results under the output path below." value={draft.script} onChange={set('script')} errors={errorAt('command')} rows={6} /> : null}
          {draft.commandMode === 'args' ? <TextArea label="Arguments" hint="The first line is the program; each further line one argument, passed as is." value={draft.args} onChange={set('args')} errors={errorAt('command')} rows={4} /> : null}
          {draft.commandMode === 'image' ? <FieldErrors id="command-errors" errors={errorAt('command')} /> : null}
          <TextArea label="Environment" hint="NAME=value, one per line; at most 32. Hosts can read these: names that look like secrets are refused." value={draft.env} onChange={set('env')} errors={errorAt('env')} rows={3} />
          <InputUploads rows={draft.inputs} onRows={(update) => setDraft((d) => ({ ...d, inputs: update(d.inputs) }))} errors={errorAt('inputs')} />
          <TextField label="Output path" hint="Files written under this folder are the job’s output, hashed and kept for download (1 GiB at most)." value={draft.outputPath} onChange={set('outputPath')} errors={errorAt('outputPath')} />
          <label className="check">
            <input type="checkbox" checked={draft.deterministic} onChange={(e) => set('deterministic')(e.target.checked)} />
            Deterministic: the same inputs give the same output (lets the result be verified where a verifier exists)
          </label>
        </section>

        <section className="card" aria-labelledby="where-heading">
          <h2 id="where-heading">Where it runs</h2>
          <TextField label="GPUs" hint={`${JOB_SPEC_LIMITS.gpuCountMin} to ${JOB_SPEC_LIMITS.gpuCountMax}, all on one machine.`} value={draft.gpuCount} onChange={set('gpuCount')} errors={errorAt('gpuCount')} inputMode="numeric" />
          <SelectField label="GPU class" value={draft.gpuClass} onChange={set('gpuClass')} errors={errorAt('gpuClass')} hint={offers.isError ? `The offers could not be loaded (${reasonOf(offers.error)}); any class that fits is used.` : choices.length === 0 && offers.isSuccess ? 'No GPUs are offered right now: the job waits in the queue until a machine that fits is offered.' : 'From the offers on the market now.'}>
            <option value="">Any class that fits</option>
            {choices.map((c) => (
              <option key={c.classId} value={c.classId}>
                {choiceText(c)}
              </option>
            ))}
          </SelectField>
          {chosen && count(draft.gpuCount) > chosen.maxPerMachine ? (
            <p className="notice" role="status">
              No machine offers {count(draft.gpuCount)} {chosen.label} GPUs free at once now (at most {chosen.maxPerMachine}): the job waits until one does.
            </p>
          ) : null}
          <SelectField label="Network" value={draft.network} onChange={(v) => set('network')(v as Draft['network'])} errors={errorAt('network')} hint="No network at all by default; an allowlist lets the job reach those public DNS names only.">
            <option value="none">None (no outbound network)</option>
            <option value="allowlist">Only these public DNS names</option>
          </SelectField>
          {draft.network === 'allowlist' ? <TextArea label="Allowed names" hint="One public DNS name per line, e.g. huggingface.co." value={draft.allow} onChange={set('allow')} errors={[]} rows={3} /> : null}
          {errors.length === 0 && fit.data && fit.data.matched === 0 ? (
            <section className="notice" aria-labelledby="no-fit-heading">
              <h3 id="no-fit-heading">No machine on the market fits this job now</h3>
              <p>{fit.data.reasons.length > 0 ? sentence(fit.data.reasons.join('; ')) : 'No offer matches its requirements and price cap.'}</p>
              <p>{spec.maxPricePerGpuHour === undefined ? 'Give a price cap to create it anyway: it then waits until a machine fits.' : 'You can still create it: it waits, funded, until a machine fits, and you can cancel it for the deposit back.'}</p>
            </section>
          ) : null}
          <TextField label="Minimum VRAM per GPU (GB)" hint="Optional." value={draft.minimumVramGb} onChange={set('minimumVramGb')} errors={errorAt('minimumVramGb')} inputMode="numeric" />
          <SelectField label="Region preference" value={draft.region} onChange={set('region')} errors={errorAt('region')} hint="A preference, not a guarantee.">
            <option value="">Anywhere</option>
            {REGIONS.map((r) => (
              <option key={r.key} value={r.key}>
                {r.label}
              </option>
            ))}
          </SelectField>
        </section>

        <section className="card" aria-labelledby="cost-heading">
          <h2 id="cost-heading">What it may cost</h2>
          <TextField label="Price cap (USD per GPU-hour)" hint="Optional: without one, the highest price among the offers that fit now." value={draft.maxPrice} onChange={set('maxPrice')} errors={errorAt('maxPrice')} inputMode="decimal" placeholder={chosen ? (chosen.lowestPrice / 1e6).toFixed(2) : '0.50'} />
          <TextField label="Runtime limit (minutes)" hint="The container is stopped at this limit; you pay for what it used, at least the minimum billing time." value={draft.runtimeMinutes} onChange={set('runtimeMinutes')} errors={errorAt('runtime')} inputMode="numeric" />
          <SelectField label="Pay with" value={draft.paymentToken} onChange={(v) => set('paymentToken')(v as Draft['paymentToken'])} errors={errorAt('paymentToken')}>
            <option value="eth">ETH</option>
            <option value="stable">USD stablecoin</option>
          </SelectField>
          <p role="status">{maxCostLine(draft, pricing.data?.platformFeeBps)}</p>
        </section>

        <section className="card" aria-labelledby="spec-heading">
          <h2 id="spec-heading">The spec</h2>
          <p className="muted">What the form sends to POST /v1/jobs: run it with gf (it reads the spec from its standard input), save it as a file for gf run -f, or send it with curl and an API key.</p>
          <pre className="spec" aria-label="Job spec as JSON" tabIndex={0}>{json}</pre>
          <CopyButton text={json} label="Copy JSON" />
          <CopyButton text={`gf run -f - <<'SPEC'\n${json}\nSPEC`} label="Copy as gf run" />
          <CopyButton text={`curl -X POST "$GF_ENDPOINT/v1/jobs" -H "Authorization: Bearer $GF_API_KEY" -H 'content-type: application/json' -d ${shellQuote(JSON.stringify(spec))}`} label="Copy as curl" />
        </section>

        <div className="page-actions">
          <button type="submit" className="primary" disabled={create.isPending}>
            {create.isPending ? 'Creating…' : 'Create job'}
          </button>
          <span className="muted">Next: fund it from your wallet on its page.</span>
        </div>
        {create.isError && !(create.error instanceof GfError && create.error.details.length > 0) ? (
          <p className="tx tx-failed" role="alert">
            Could not create the job: {reasonOf(create.error)}
          </p>
        ) : null}
      </form>
      <SaveTemplate spec={spec} specErrors={errors.length} onInvalid={() => setTried(true)} />
    </Page>
  );
}

const count = (text: string) => (/^\d+$/.test(text.trim()) ? Number(text.trim()) : 0);

/** "At most $X (compute $Y + fee $Z)" for the cap, count and runtime typed, once all three are numbers. */
function maxCostLine(draft: Draft, feeBps: number | undefined): string {
  const price = parseUsdToMicroUsd(draft.maxPrice.trim());
  const gpus = count(draft.gpuCount);
  const minutes = count(draft.runtimeMinutes);
  if (!draft.maxPrice.trim() || !price.ok || gpus === 0 || minutes === 0 || feeBps === undefined) {
    return 'The most it can cost is fixed when it is created: price cap × GPUs × runtime limit, plus the platform fee. Type a price cap to see it here.';
  }
  try {
    const cost = maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: price.microUsd, gpuCount: gpus, maxRuntimeSeconds: minutes * 60, platformFeeBps: feeBps });
    return `At most ${usd(cost.totalMicroUsd)} (compute ${usd(cost.computeMicroUsd)} + fee ${usd(cost.feeMicroUsd)}), held in escrow; what the job does not use goes back to your wallet.`;
  } catch {
    return 'The price cap, GPUs and runtime limit give a maximum cost beyond what the escrow holds: lower one of them.';
  }
}

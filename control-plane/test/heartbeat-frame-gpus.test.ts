import { agentMessageSchema, type HeartbeatMessage } from '@gpufarm/shared';
import t from 'tap';
import { frameGpusText } from '../src/agent-gateway/frame-gpus.js';
import { heartbeatInput, type HeartbeatBeat } from '../src/machines/store.js';
import { createPostgresTestDatabase } from './helpers/database.js';

/** A small deterministic generator (the same cases every run). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 2 ** 32;
  };
}

type Gpu = HeartbeatMessage['gpus'][number];

function gpusOf(next: () => number, count: number): Gpu[] {
  const figure = (make: () => number) => (next() < 0.1 ? null : make());
  return Array.from({ length: count }, (_, index) => ({
    index,
    uuid: `GPU-${Math.floor(next() * 1e9).toString(16)}-${index}`,
    // Whole, tenths, and doubles whose shortest text has 16 or 17 digits (30.000000000000004).
    temperatureC: figure(() => (next() < 0.3 ? 20 + Math.round(next() * 700) / 10 : next() < 0.03 ? 0.1 + 0.2 + 30 : Math.round(20 + next() * 70))),
    utilizationPercent: figure(() => (next() < 0.03 ? next() * 100 : Math.round(next() * 100))),
    memoryUsedBytes: figure(() => Math.round(next() * 2 ** (next() < 0.05 ? 53 : 37))),
    powerDrawWatts: figure(() => (next() < 0.5 ? Math.round(next() * 7000) / 10 : Math.round(next() * 700))),
  }));
}

/** A heartbeat as the agent daemon writes it (`agent/src/daemon/daemon.ts`). */
function agentFrame(gpus: Gpu[], extra: Partial<HeartbeatMessage> = {}): string {
  const message: HeartbeatMessage = {
    type: 'heartbeat',
    sentAt: '2026-11-29T12:00:00.000Z',
    health: { status: 'healthy', reason: null, gpuProbe: 'simulated', checkedAt: '2026-11-29T11:59:00.000Z' },
    gpus,
    inventory: null,
    runningAssignmentIds: [],
    draining: false,
    ...extra,
  };
  return JSON.stringify(message);
}

/** The frame as the gateway has it: parsed and checked. */
function parsedGpus(frame: string): Gpu[] {
  const message = agentMessageSchema.parse(JSON.parse(frame));
  if (message.type !== 'heartbeat') throw new Error('not a heartbeat');
  return message.gpus;
}

/** Every number in `text` has at most 15 digits and no exponent. */
function shortNumbers(text: string): boolean {
  return (text.replace(/"[^"]*"/g, '""').match(/-?[\d.eE+-]+/g) ?? []).every((n) => !/[eE]/.test(n) && n.replace(/[-.]/g, '').length <= 15);
}

t.test('behavior: an agent-written heartbeat gives the very text JSON.stringify gives its parsed GPUs, unless a number is longer than 15 digits', async (t) => {
  const next = random(7);
  let cut = 0;
  let declined = 0;
  for (let i = 0; i < 2000; i++) {
    const frame = agentFrame(gpusOf(next, Math.floor(next() * 9)), i % 5 === 0 ? { runningAssignmentIds: ['asg_0123456789abcdefghjkmnpqrs'], draining: true } : {});
    const gpus = parsedGpus(frame);
    const text = frameGpusText(frame);
    const stringified = JSON.stringify(gpus);
    if (shortNumbers(stringified)) {
      t.equal(text, stringified, `frame ${i}`);
      cut++;
    } else {
      t.equal(text, null, `frame ${i} has a number of 16 or more digits`);
      declined++;
    }
  }
  t.ok(cut > 1000 && declined > 50, `both kinds seen (${cut} cut, ${declined} declined)`);
});

t.test('behavior: a frame written in any other way is declined', async (t) => {
  const gpus = gpusOf(random(3), 2).map((g) => ({ ...g, temperatureC: 50, utilizationPercent: 40, memoryUsedBytes: 1000, powerDrawWatts: 300.5 }));
  const frame = agentFrame(gpus);
  t.equal(frameGpusText(frame), JSON.stringify(gpus), 'the plain frame is cut');
  const cases: Record<string, string> = {
    'whitespace in the array': frame.replace('"gpus":[{', '"gpus":[ {'),
    'whitespace after the key': frame.replace('"gpus":', '"gpus" :'),
    'keys of a GPU in another order': frame.replace('{"index":0,"uuid":', '{"uuid":').replace(`"uuid":"${gpus[0]!.uuid}","temperatureC"`, `"uuid":"${gpus[0]!.uuid}","index":0,"temperatureC"`),
    'an exponent': frame.replace('"memoryUsedBytes":1000', '"memoryUsedBytes":1e3'),
    'a 16-digit number': frame.replace('"memoryUsedBytes":1000', '"memoryUsedBytes":1000000000000000'),
    'a long fraction': frame.replace('"powerDrawWatts":300.5', '"powerDrawWatts":300.5000000000001'),
    'an escape in a uuid': frame.replace(`"uuid":"${gpus[0]!.uuid}"`, `"uuid":"${gpus[0]!.uuid}\\u0041"`),
    'an escape elsewhere': frame.replace('"gpuProbe":"simulated"', '"gpuProbe":"simul\\u0061ted"'),
    'a second gpus key, escaped': frame.replace('"inventory":null', '"gp\\u0075s":[],"inventory":null'),
    'a second gpus key, after': frame.replace(/}$/, ',"gpus":[]}'),
    'a second gpus key, before': frame.replace('"type":"heartbeat"', '"gpus":[],"type":"heartbeat"'),
    '"gpus" as a string elsewhere': frame.replace('"reason":null', '"reason":"gpus"'),
  };
  for (const [why, odd] of Object.entries(cases)) {
    t.not(odd, frame, `${why}: the case changes the frame`);
    let valid = true;
    try {
      parsedGpus(odd);
    } catch {
      valid = false;
    }
    t.ok(valid || why.startsWith('keys of'), `${why}: still a valid heartbeat`);
    t.equal(frameGpusText(odd), null, why);
  }
});

t.test('behavior: whatever a heartbeat frame is mutated to, a cut text parses to the frame\'s GPUs and has only short numbers', async (t) => {
  const next = random(11);
  const alphabet = ['"', '\\', ',', ':', '[', ']', '{', '}', ' ', '0', '1', '.', 'e', '-', 'gpus', '"gpus":[]', 'null', 'true'];
  let checked = 0;
  for (let i = 0; i < 20000; i++) {
    let frame = agentFrame(gpusOf(next, 1 + Math.floor(next() * 3)));
    for (let k = 1 + Math.floor(next() * 3); k > 0; k--) {
      const at = Math.floor(next() * frame.length);
      const piece = alphabet[Math.floor(next() * alphabet.length)]!;
      frame = next() < 0.5 ? frame.slice(0, at) + piece + frame.slice(at) : frame.slice(0, at) + piece + frame.slice(at + piece.length);
    }
    let gpus: Gpu[];
    try {
      gpus = parsedGpus(frame);
    } catch {
      continue;
    }
    checked++;
    const text = frameGpusText(frame);
    if (text === null) continue;
    t.ok(shortNumbers(text), `mutation ${i}: short numbers only`);
    t.same(JSON.parse(text), gpus, `mutation ${i}: the cut text is the GPUs`);
  }
  t.ok(checked > 100, `${checked} mutated frames still parsed`);
});

/** The writer's input as it was serialized before it was written out by hand. */
function formerInput(beats: readonly HeartbeatBeat[]): string {
  const mean = (gpus: HeartbeatBeat['gpus']) => {
    const known = gpus.filter((g) => g.utilizationPercent !== null);
    return known.length === 0 ? null : known.reduce((sum, g) => sum + g.utilizationPercent!, 0) / known.length;
  };
  return JSON.stringify(beats.map((b) => ({ id: b.machineId, gpus: b.gpus, util: mean(b.gpus), draining: b.draining, status: b.reported?.status ?? null, reason: b.reported?.reason ?? null, want_row: b.wantRow })));
}

function beatsOf(next: () => number, count: number): HeartbeatBeat[] {
  const reasons = [null, 'GPU 0 is too hot', 'a "quoted" reason\nwith a line', 'ünïcödé ✓'];
  return Array.from({ length: count }, (_, i) => {
    const gpus = gpusOf(next, Math.floor(next() * 5));
    const frame = agentFrame(gpus);
    const status = (['online', 'unhealthy', 'draining'] as const)[Math.floor(next() * 3)]!;
    return {
      machineId: `mach_${i.toString().padStart(4, '0')}`,
      gpus: parsedGpus(frame),
      draining: next() < 0.2,
      reported: next() < 0.1 ? null : { status, reason: reasons[Math.floor(next() * reasons.length)]! },
      wantRow: next() < 0.1,
      ...(next() < 0.7 ? { gpusJson: frameGpusText(frame) } : {}),
    };
  });
}

t.test('behavior: the writer\'s input is, to the character, what JSON.stringify made of the beats', async (t) => {
  const next = random(5);
  for (const count of [0, 1, 2, 50, 500]) {
    const beats = beatsOf(next, count);
    t.equal(heartbeatInput(beats), formerInput(beats), `${count} beats`);
  }
});

t.test('behavior: in PostgreSQL, the input with odd but accepted GPU texts gives the rows the serialized figures give', async (t) => {
  const { db } = await createPostgresTestDatabase(t, { empty: true });
  const next = random(9);
  const beats = beatsOf(next, 300);
  // Texts the cut accepts that JSON.stringify would write otherwise: trailing zeros, a signed zero.
  const odd = agentFrame([{ index: 0, uuid: 'GPU-a', temperatureC: 50, utilizationPercent: 0, memoryUsedBytes: 123456789012345, powerDrawWatts: 300.5 }])
    .replace('"temperatureC":50', '"temperatureC":50.000')
    .replace('"utilizationPercent":0', '"utilizationPercent":-0')
    .replace('"powerDrawWatts":300.5', '"powerDrawWatts":300.50');
  const oddText = frameGpusText(odd);
  t.ok(oddText?.includes('50.000'), 'the odd frame is cut as it is written');
  beats.push({ machineId: 'mach_odd', gpus: parsedGpus(odd), draining: false, reported: null, wantRow: false, gpusJson: oddText });
  const rows = await db.query<{ id: string; same: boolean }>(
    `SELECT a.id, a.gpus = b.gpus AND a.util IS NOT DISTINCT FROM b.util AND a.draining = b.draining AND a.status IS NOT DISTINCT FROM b.status
            AND a.reason IS NOT DISTINCT FROM b.reason AND a.want_row = b.want_row AS same
       FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (id text, gpus jsonb, util real, draining boolean, status text, reason text, want_row boolean)) WITH ORDINALITY AS a(id, gpus, util, draining, status, reason, want_row, n)
       JOIN ROWS FROM (jsonb_to_recordset($2::jsonb) AS (id text, gpus jsonb, util real, draining boolean, status text, reason text, want_row boolean)) WITH ORDINALITY AS b(id, gpus, util, draining, status, reason, want_row, n) ON a.n = b.n AND a.id = b.id`,
    [heartbeatInput(beats), formerInput(beats)],
  );
  t.equal(rows.length, beats.length, 'every beat, in order');
  t.same(rows.filter((r) => !r.same), [], 'each row the same');
});

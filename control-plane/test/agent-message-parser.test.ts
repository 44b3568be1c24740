import { agentMessageSchema } from '@gpufarm/shared';
import t from 'tap';
import { z } from 'zod';
import { agentMessageParser } from '../src/agent-gateway/link.js';
import { heartbeat, hello, testInventory } from './helpers/agent-client.js';

// The gateway parses every agent message with the compiled schema (`z.compile`): it must be the
// shared schema's checks, answers and issues, and compile whole (a part zod cannot compile would
// silently run on the runtime parser again, ten times the CPU per heartbeat).
t.test('the agent message schema compiles whole', async (t) => {
  t.doesNotThrow(() => z.compile(agentMessageSchema, { strict: true }));
});

t.test('the compiled parser answers as the schema does', async (t) => {
  const inventory = testInventory();
  const valid: unknown[] = [hello(inventory, []), heartbeat(), heartbeat({ inventory })];
  for (const message of valid) {
    const compiled = agentMessageParser.safeParse(message);
    t.ok(compiled.success, 'valid');
    t.same(compiled.data, agentMessageSchema.parse(message));
  }
  const beat = heartbeat();
  const invalid: unknown[] = [
    { ...beat, gpus: [{ ...beat.gpus[0], utilizationPercent: 101 }] },
    { ...beat, gpus: [{ ...beat.gpus[0], index: 1.5 }] },
    { ...beat, extra: true },
    { ...beat, sentAt: 'yesterday' },
    { ...beat, type: 'heartbeats' },
  ];
  for (const message of invalid) {
    const compiled = agentMessageParser.safeParse(message);
    t.notOk(compiled.success, 'invalid');
    t.same(compiled.error?.issues, agentMessageSchema.safeParse(message).error?.issues);
  }
});

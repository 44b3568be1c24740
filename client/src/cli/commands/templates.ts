import type { JobTemplate } from '@gpufarm/shared';
import { openContext } from '../context.js';
import { EXIT } from '../exit.js';
import { showList } from '../listing.js';
import type { CommandInput } from '../program.js';
import { terminalSafe } from '../terminal-text.js';

/** A cell of at most `max` characters on one line: a description or a command is cut, never wrapped. */
function short(text: string, max: number): string {
  const line = terminalSafe(text).replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

const commandOf = (template: JobTemplate): string => {
  const command = template.spec.command;
  return Array.isArray(command) && command.length > 0 ? command.map(String).join(' ') : '(the image’s own)';
};

/** `gf templates`: the built-in templates the deployment can run, then the account's own; `gf run --template NAME` runs one. */
export async function run({ global }: CommandInput): Promise<number> {
  const ctx = await openContext(global);
  await showList(ctx, {
    all: false,
    page: () => ctx.client.templates.list(),
    walk: async function* () {
      yield* (await ctx.client.templates.list()).data;
    },
    noun: 'templates',
    summary: (items) => `${items.length} templates · run one with: gf run --template NAME`,
    columns: [
      { heading: 'NAME', cell: (x) => x.name },
      { heading: 'SOURCE', cell: (x) => (x.source === 'built_in' ? 'built-in' : 'yours') },
      { heading: 'IMAGE', cell: (x) => short(String(x.spec.image ?? '-'), 48) },
      { heading: 'COMMAND', cell: (x) => short(commandOf(x), 40) },
      { heading: 'DESCRIPTION', cell: (x) => short(x.description ?? '', 60) },
    ],
  });
  return EXIT.ok;
}

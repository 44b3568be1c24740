import { UsageError } from '../exit.js';
import type { CommandInput } from '../program.js';

export function run(_input: CommandInput): Promise<number> {
  return Promise.reject(new UsageError('gf login is not built yet.'));
}

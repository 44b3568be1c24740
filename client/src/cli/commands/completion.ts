import { bashCompletion, zshCompletion } from '../completion.js';
import { EXIT } from '../exit.js';
import type { CommandInput } from '../program.js';

/** `gf completion bash|zsh`: prints the completion script for the shell. */
export function run({ args, root }: CommandInput): Promise<number> {
  process.stdout.write(args[0] === 'zsh' ? zshCompletion(root) : bashCompletion(root));
  return Promise.resolve(EXIT.ok);
}

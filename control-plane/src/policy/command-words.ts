/**
 * Reads a job's argv (and env values) as the policy rules need them: simple commands with their
 * program word found, shell scripts given to `sh -c` split into their own commands, and options
 * paired with their values. Best effort by design: it never runs anything, does not expand
 * variables, and a construct it does not understand only means fewer program words found; the
 * string-level checks (URLs, hosts, paths) still see every argument.
 */

/** One word of the command or of an env value, with the request field it came from. */
export interface Word {
  text: string;
  field: string;
}

/**
 * A simple command: `program` is the word that names the executable (after wrappers such as
 * `nohup`, `env`, `timeout 60`), null for env values and when none was found; `programName` is
 * its lower-cased basename without `.exe`; `args` are the words after it.
 */
export interface SimpleCommand {
  program: Word | null;
  programName: string | null;
  args: Word[];
}

/** An option and its value: `--algo=x` and `--algo x` both give `{ name: '--algo', value: 'x' }`. */
export interface CommandOption {
  name: string;
  /** The inline value, else the next word when it does not start with `-`; null otherwise. */
  value: string | null;
  field: string;
}

const SHELLS: ReadonlySet<string> = new Set(['sh', 'bash', 'dash', 'zsh', 'ash', 'ksh', 'mksh']);

/** Programs that run another program; the value lists options that take a separate value. */
const WRAPPERS: ReadonlyMap<string, { valueOptions?: readonly string[]; positionals?: number }> = new Map([
  ['nohup', {}], ['exec', {}], ['command', {}], ['builtin', {}], ['time', {}], ['setsid', {}], ['busybox', {}],
  ['env', { valueOptions: ['-u', '-C', '--unset', '--chdir', '-S'] }],
  ['nice', { valueOptions: ['-n', '--adjustment'] }],
  ['ionice', { valueOptions: ['-c', '-n', '-p', '-P', '-u'] }],
  ['timeout', { valueOptions: ['-s', '-k', '--signal', '--kill-after'] }],
  ['stdbuf', { valueOptions: ['-i', '-o', '-e'] }],
  ['taskset', { valueOptions: [] }],
  ['numactl', { valueOptions: ['-N', '-m', '-C', '-p', '-i', '-l'] }],
  ['chrt', {}],
  ['sudo', { valueOptions: ['-u', '-g', '-C', '-D', '-h', '-p', '-r', '-t', '-U', '-T'] }],
  ['doas', { valueOptions: ['-u', '-C'] }],
  ['gosu', { positionals: 1 }], ['su-exec', { positionals: 1 }],
  ['tini', {}], ['dumb-init', {}], ['catatonit', {}], ['xargs', { valueOptions: ['-n', '-P', '-I', '-d', '-L', '-s', '-a', '-E'] }],
  // Shell words that come before a command.
  ['if', {}], ['then', {}], ['else', {}], ['elif', {}], ['do', {}], ['while', {}], ['until', {}], ['!', {}], ['{', {}],
]);

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
/** Durations, priorities, CPU lists and masks that wrappers take before the program. */
const WRAPPER_NUMBER = /^(?:0x[0-9a-f]+|[0-9][0-9.,:-]*[smhd]?)$/i;
const SCRIPT_FLAG = /^-[a-zA-Z]*c[a-zA-Z]*$/;
const MAX_DEPTH = 4;
const OPERATORS: ReadonlySet<string> = new Set([';', '&', '|', '(', ')', '`', '\n']);
const BLANKS: ReadonlySet<string> = new Set([' ', '\t', '\r', '\v', '\f']);

/** The lower-cased basename of a program word, without `.exe`. */
export function programName(word: string): string {
  const base = word.slice(word.lastIndexOf('/') + 1).toLowerCase();
  return base.endsWith('.exe') ? base.slice(0, -'.exe'.length) : base;
}

/**
 * The simple commands of an argv: the argv itself (fields `command[i]`) and, recursively, those
 * of a script given to a shell with `-c`. Other arguments with spaces (`--args "-m 0 -a 3"`)
 * are split on whitespace in place, without program words.
 */
export function commandsOfArgv(argv: readonly string[]): SimpleCommand[] {
  return simpleCommands(argv.map((text, i) => ({ text, field: `command[${i}]` })), 0);
}

/** An env value as a command without a program: its whitespace-separated words. */
export function commandOfValue(text: string, field: string): SimpleCommand {
  return { program: null, programName: null, args: splitWords(text, field) };
}

/** The options of a command's arguments, in order. */
export function optionsOf(command: SimpleCommand): CommandOption[] {
  const options: CommandOption[] = [];
  command.args.forEach((word, i) => {
    const text = word.text;
    if (!text.startsWith('-') || text === '-' || text === '--' || /^-[0-9.]+$/.test(text)) return;
    const eq = text.indexOf('=');
    if (text.startsWith('--') && eq > 2) {
      options.push({ name: text.slice(0, eq), value: text.slice(eq + 1), field: word.field });
      return;
    }
    const glued = /^(-[a-zA-Z])([0-9]+)$/.exec(text);
    if (glued?.[1] !== undefined && glued[2] !== undefined) {
      options.push({ name: glued[1], value: glued[2], field: word.field });
      return;
    }
    const next = command.args[i + 1]?.text;
    options.push({ name: text, value: next !== undefined && !next.startsWith('-') ? next : null, field: word.field });
  });
  return options;
}

function splitWords(text: string, field: string): Word[] {
  return text
    .split(/\s+/)
    .filter((w) => w !== '')
    .map((w) => ({ text: w, field }));
}

/** One simple command from its raw words, plus the commands of any `sh -c` script in it. */
function simpleCommands(words: readonly Word[], depth: number): SimpleCommand[] {
  const at = programIndex(words);
  const program = at === null ? null : (words[at] ?? null);
  const name = program === null ? null : programName(program.text);
  const nested: SimpleCommand[] = [];
  const args: Word[] = [];
  const isShell = name !== null && SHELLS.has(name);
  let scriptNext = false;
  let scriptSeen = false;
  for (const word of words.slice(at === null ? 0 : at + 1)) {
    if (scriptNext) {
      scriptNext = false;
      scriptSeen = true;
      if (depth < MAX_DEPTH) {
        for (const segment of splitScript(word.text, word.field)) nested.push(...simpleCommands(segment, depth + 1));
      }
      continue;
    }
    if (isShell && !scriptSeen && SCRIPT_FLAG.test(word.text)) scriptNext = true;
    args.push(...(/\s/.test(word.text) ? splitWords(word.text, word.field) : [word]));
  }
  return [{ program, programName: name, args }, ...nested];
}

/** The index of the program word, skipping assignments, wrappers and their options. */
function programIndex(words: readonly Word[]): number | null {
  let i = 0;
  for (let hops = 0; hops < 16; hops += 1) {
    while (i < words.length && ASSIGNMENT.test(words[i]?.text ?? '')) i += 1;
    const word = words[i];
    if (word === undefined) return null;
    const wrapper = WRAPPERS.get(programName(word.text));
    if (wrapper === undefined) return /\s/.test(word.text) ? null : i;
    i += 1;
    let positionals = wrapper.positionals ?? 0;
    while (i < words.length) {
      const text = words[i]?.text ?? '';
      if (text === '--') {
        i += 1;
        break;
      }
      if (text.startsWith('-') && text.length > 1) {
        i += wrapper.valueOptions?.includes(text) === true ? 2 : 1;
      } else if (ASSIGNMENT.test(text) || WRAPPER_NUMBER.test(text)) {
        i += 1;
      } else if (positionals > 0) {
        positionals -= 1;
        i += 1;
      } else break;
    }
  }
  return null;
}

/**
 * Splits a shell script into the raw words of its simple commands: quotes and backslashes are
 * honoured, `;`, `&`, `|`, newlines, parentheses, backquotes and `$(` end a command, `#` starts
 * a comment, and the target of a redirection (`> file`) is kept as a word.
 */
export function splitScript(script: string, field: string): Word[][] {
  const commands: Word[][] = [];
  let words: Word[] = [];
  let current = '';
  let inWord = false;
  const endWord = () => {
    if (inWord) words.push({ text: current, field });
    current = '';
    inWord = false;
  };
  const endCommand = () => {
    endWord();
    if (words.length > 0) commands.push(words);
    words = [];
  };
  for (let i = 0; i < script.length; i += 1) {
    const c = script[i] ?? '';
    if (c === '\\') {
      current += script[i + 1] ?? '';
      inWord = true;
      i += 1;
    } else if (c === "'") {
      const end = script.indexOf("'", i + 1);
      const stop = end < 0 ? script.length : end;
      current += script.slice(i + 1, stop);
      inWord = true;
      i = stop;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < script.length && script[j] !== '"'; j += 1) {
        if (script[j] === '\\' && j + 1 < script.length) j += 1;
        current += script[j] ?? '';
      }
      inWord = true;
      i = j;
    } else if (c === '#' && !inWord) {
      const newline = script.indexOf('\n', i);
      i = newline < 0 ? script.length : newline - 1;
    } else if (c === '$' && script[i + 1] === '(') {
      endCommand();
      i += 1;
    } else if (OPERATORS.has(c)) {
      endCommand();
    } else if (c === '<' || c === '>') {
      // A redirection: `2>` drops the descriptor digit; the target stays as an argument word.
      if (/^[0-9]+$/.test(current)) {
        current = '';
        inWord = false;
      }
      endWord();
    } else if (BLANKS.has(c)) {
      endWord();
    } else {
      current += c;
      inWord = true;
    }
  }
  endCommand();
  return commands;
}

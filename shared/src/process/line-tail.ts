/**
 * The last lines a child process printed, kept as they arrive (chunks split anywhere), so a
 * supervisor can say what it printed before it died without keeping all of it.
 */
export class LineTail {
  private readonly kept: string[] = [];
  private partial = '';

  constructor(private readonly max = 20) {}

  /** Adds output; answers the whole lines it completed. */
  push(chunk: Buffer | string): string[] {
    const parts = (this.partial + chunk.toString()).split('\n');
    this.partial = parts.pop() ?? '';
    const lines = parts.map((line) => line.replace(/\r$/, ''));
    for (const line of lines) {
      if (line.trim() === '') continue;
      this.kept.push(line);
      if (this.kept.length > this.max) this.kept.shift();
    }
    return lines;
  }

  /** The kept lines, oldest first, with a last line not yet ended by a newline. */
  lines(): string[] {
    return this.partial.trim() === '' ? [...this.kept] : [...this.kept, this.partial].slice(-this.max);
  }
}

/** How a child ended, as `ChildProcess`'s 'exit' event gives it. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** `exit code 1`, `signal SIGKILL`. */
export function describeExit(exit: ChildExit): string {
  return exit.signal ? `signal ${exit.signal}` : `exit code ${String(exit.code)}`;
}

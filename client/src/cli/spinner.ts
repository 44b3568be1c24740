/**
 * A one-line status on stderr: redrawn in place with a spinner on a terminal, else one plain
 * line per change (so a pipe or a log file gets readable lines, not control codes).
 */
export function createStatusLine(interactive: boolean) {
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  let text = '';
  let frame = 0;
  let timer: NodeJS.Timeout | undefined;
  const draw = () => process.stderr.write(`\r\x1b[2K${frames[frame++ % frames.length]} ${text}`);
  return {
    set(next: string) {
      if (next === text) return;
      text = next;
      if (!interactive) {
        process.stderr.write(`${text}\n`);
        return;
      }
      timer ??= setInterval(draw, 100).unref();
      draw();
    },
    /** Clears the line (before other output, or at the end). */
    clear() {
      if (timer) clearInterval(timer);
      timer = undefined;
      if (interactive && text) process.stderr.write('\r\x1b[2K');
      text = '';
    },
  };
}
export type StatusLine = ReturnType<typeof createStatusLine>;

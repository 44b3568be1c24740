import { bytesText, durationText } from './format.js';

/**
 * A download's progress on stderr: on a terminal a bar redrawn in place with bytes, rate and
 * ETA (at most ten times a second); into a pipe nothing until `done` prints one plain line.
 */
export function createProgressBar(label: string, interactive: boolean, width = 24) {
  const started = performance.now();
  let lastDraw = 0;
  let shown = false;
  const line = (received: number, total: number) => {
    const seconds = (performance.now() - started) / 1000;
    const rate = seconds > 0 ? received / seconds : 0;
    const fraction = total > 0 ? Math.min(1, received / total) : 1;
    const filled = Math.round(fraction * width);
    const eta = rate > 0 && total > received ? ` ETA ${durationText((total - received) / rate)}` : '';
    return `${label} [${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${bytesText(received)}/${bytesText(total)} ${bytesText(Math.round(rate))}/s${eta}`;
  };
  return {
    update(received: number, total: number) {
      if (!interactive) return;
      const now = performance.now();
      if (now - lastDraw < 100 && received < total) return;
      lastDraw = now;
      shown = true;
      process.stderr.write(`\r\x1b[2K${line(received, total)}`);
    },
    /** Ends the bar: on a terminal clears it; the caller prints the outcome. */
    done() {
      if (interactive && shown) process.stderr.write('\r\x1b[2K');
    },
  };
}

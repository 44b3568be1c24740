/**
 * The text of a heartbeat frame's `gpus`, cut from the frame itself, for the beat writer's
 * statement (`heartbeatWriter`): serializing every heartbeat's GPU figures again was the largest
 * part of writing a batch of beats. Taken only when that text is, as jsonb, the very value the
 * frame was parsed to; null otherwise, and the writer serializes the parsed figures as before.
 *
 * The conditions, each cheap: the frame holds no backslash (every key and string is spelled
 * out, so no escaped `"gp\u0075s"` is a second `gpus`), and `"gpus"` once, as a key; its value
 * is an array of GPU objects written as the agent writes them (`gpuLiveSchema`'s keys in its
 * order, no whitespace) whose numbers have at most 15 digits and no exponent. A decimal of at
 * most 15 significant digits is the exact value of the shortest text of the double it parses
 * to, so PostgreSQL's numeric reads it as the value JSON.parse gave.
 */

const INT = '(?:0|[1-9]\\d{0,14})';
/** A number of at most 15 digits, no exponent: an integer, or a fraction of at most 16 characters of digits and point. */
const NUM = `-?(?:${INT}(?=[,}])|(?=\\d*\\.\\d+[,}])(?=[\\d.]{3,16}[,}])(?:0|[1-9]\\d*)\\.\\d+)`;
const NUM_OR_NULL = `(?:null|${NUM})`;
const GPU = `\\{"index":${INT},"uuid":"[^"\\\\]+","temperatureC":${NUM_OR_NULL},"utilizationPercent":${NUM_OR_NULL},"memoryUsedBytes":${NUM_OR_NULL},"powerDrawWatts":${NUM_OR_NULL}\\}`;
/** Sticky: matched where the key's value starts. */
const GPUS_VALUE = new RegExp(`\\[(?:${GPU}(?:,${GPU})*)?\\]`, 'y');

/** Searched from its second character: a `"` starts every key, a `g` few. */
const KEY_TAIL = 'gpus"';

/**
 * `frame` (a heartbeat that parsed and passed `heartbeatMessageSchema`): the text of its
 * `gpus`, or null when it is written in any other way than the conditions above.
 */
export function frameGpusText(frame: string): string | null {
  const at = frame.indexOf(KEY_TAIL);
  if (at < 1 || frame.charCodeAt(at - 1) !== 0x22 /* " */ || frame.charCodeAt(at + KEY_TAIL.length) !== 0x3a /* : */) return null;
  if (frame.indexOf(KEY_TAIL, at + KEY_TAIL.length) >= 0 || frame.indexOf('\\') >= 0) return null;
  GPUS_VALUE.lastIndex = at + KEY_TAIL.length + 1;
  const match = GPUS_VALUE.exec(frame);
  return match === null ? null : match[0];
}

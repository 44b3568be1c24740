/* eslint-disable no-control-regex -- these patterns find the control characters they remove */
/**
 * Text written by others (a job's output, a farm's machine) made safe to print: escape
 * sequences and control characters a terminal would act on are removed, so a line can neither
 * set the window title, clear the screen, move the cursor, nor fake a line of its own.
 *
 * Removed: OSC, DCS, SOS, PM and APC strings up to their terminator (BEL or ST; to the end of the
 * text when unterminated), CSI sequences, other ESC sequences, their 8-bit C1 forms, and every
 * other C0 and C1 control and DEL. Tab is kept. A line break or carriage return inside the text
 * becomes a space, so the text stays one line and its words stay apart.
 *
 * @example terminalSafe('\x1b]0;pwned\x07\x1b[2Jdone\r\n') === 'done  '
 */
export function terminalSafe(text: string): string {
  return text.replace(STRINGS, '').replace(CSI, '').replace(ESCAPES, '').replace(BREAKS, ' ').replace(CONTROLS, '');
}

/** OSC (ESC ]), DCS (ESC P), SOS (ESC X), PM (ESC ^), APC (ESC _) and their C1 forms, up to BEL, ST or the end. */
const STRINGS = /(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[\s\S]*?(?:\x07|\x1b\\|\x9c|$)/g;
/** CSI (ESC [ or C1 0x9b): parameters, intermediates and a final byte, or whatever of them there is at the end. */
const CSI = /(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?/g;
/** Any other escape sequence: ESC, intermediates, a final byte (or a lone ESC). */
const ESCAPES = /\x1b[\x20-\x2f]*[\x30-\x7e]?/g;
/** Line breaks inside one line of text. */
const BREAKS = /[\n\r\v\f\u0085\u2028\u2029]/g;
/** The remaining C0 controls but tab, DEL and C1. */
const CONTROLS = /[\x00-\x08\x0e-\x1f\x7f-\x9f]/g;

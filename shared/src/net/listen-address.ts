/** Where a metrics endpoint listens: an address and port, or `off`. */
export type ListenSetting = { host: string; port: number } | 'off';

/**
 * Parses `host:port` (`127.0.0.1:9464`, `[::1]:9464`, port 0 for any free one) or `off`;
 * null when it is neither. The host of a bracketed IPv6 address comes back without brackets.
 *
 * @example parseListenSetting('127.0.0.1:9464') // { host: '127.0.0.1', port: 9464 }
 * @example parseListenSetting('off') // 'off'
 */
export function parseListenSetting(text: string): ListenSetting | null {
  const value = text.trim();
  if (value.toLowerCase() === 'off') return 'off';
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(value);
  if (!m) return null;
  const port = Number(m[3]);
  if (port > 65535) return null;
  return { host: m[1] ?? m[2]!, port };
}

/** The error text of a bad listen setting, for config validation messages. */
export const LISTEN_SETTING_HINT = 'must be host:port (such as 127.0.0.1:9464 or [::1]:9464) or off';

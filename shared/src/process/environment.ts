/**
 * What a child process may see of its parent's environment when it holds none of the parent's
 * secrets: the system's basics (paths, user, locale, temp folder) and how Docker and TLS are
 * reached. A supervisor that holds the admin token or the chain operator's key starts its other
 * children with this, so `/proc/<pid>/environ` of an agent or a chain node shows neither.
 */
export const SYSTEM_ENV_NAMES = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LC_ALL',
  'LC_CTYPE',
  'TZ',
  'TMPDIR',
  'DOCKER_HOST',
  'DOCKER_CERT_PATH',
  'DOCKER_TLS_VERIFY',
  'NODE_EXTRA_CA_CERTS',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
] as const;

/** The `SYSTEM_ENV_NAMES` values set in `from`. */
export function systemEnvironment(from: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return Object.fromEntries(SYSTEM_ENV_NAMES.flatMap((name) => (from[name] === undefined ? [] : [[name, from[name]]])));
}

/**
 * What the configuration page says about one setting beside what its zod schema says (type,
 * range, default): `npm run docs` renders the schema and these together, so a setting without
 * its entry does not type-check.
 */
export interface SettingDoc {
  /** What it does, in markdown (one table cell). */
  description: string;
  /** Shown instead of the schema's default where that is not the whole story (`unset (npm start: …)`). */
  default?: string;
}

/**
 * The variables among `names` that `env` sets, an empty one counting as unset (as in `VAR= cmd`):
 * what a settings schema parses, so that nothing else of the environment reaches it.
 */
export function presentSettings(names: readonly string[], env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  return Object.fromEntries(names.flatMap((name) => {
    const value = env[name];
    return value ? [[name, value]] : [];
  }));
}

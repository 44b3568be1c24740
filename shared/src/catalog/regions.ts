/**
 * Coarse regions: the only location a customer ever sees. A group (for example `Europe`)
 * gathers several keys; the capacity filter `region` accepts either.
 */
export interface Region {
  key: string;
  label: string;
  group: string;
}

export const REGIONS: readonly Region[] = [
  { key: 'us-east', label: 'US East', group: 'North America' },
  { key: 'us-central', label: 'US Central', group: 'North America' },
  { key: 'us-west', label: 'US West', group: 'North America' },
  { key: 'canada', label: 'Canada', group: 'North America' },
  { key: 'europe-west', label: 'Europe West', group: 'Europe' },
  { key: 'europe-central', label: 'Europe Central', group: 'Europe' },
  { key: 'europe-north', label: 'Europe North', group: 'Europe' },
  { key: 'asia-east', label: 'Asia East', group: 'Asia Pacific' },
  { key: 'asia-southeast', label: 'Asia Southeast', group: 'Asia Pacific' },
  { key: 'oceania', label: 'Oceania', group: 'Asia Pacific' },
  { key: 'south-america', label: 'South America', group: 'South America' },
];

const byKey = new Map(REGIONS.map((r) => [r.key, r]));

export const regionKeys = REGIONS.map((r) => r.key);
export const regionGroups = [...new Set(REGIONS.map((r) => r.group))];

export function findRegion(key: string): Region | undefined {
  return byKey.get(key);
}

/** Region keys selected by a key or a group name (group names match case-insensitively). */
export function regionKeysFor(keyOrGroup: string): string[] {
  if (byKey.has(keyOrGroup)) return [keyOrGroup];
  const group = keyOrGroup.toLowerCase();
  return REGIONS.filter((r) => r.group.toLowerCase() === group).map((r) => r.key);
}

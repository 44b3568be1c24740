/** Fleet states as text with a colour that only repeats what the text says. */

const VERDICT_TONE: Record<string, string> = { healthy: 'ok', warning: 'wait', failed: 'bad' };
const STATE_TONE: Record<string, string> = { online: 'ok', busy: 'run', draining: 'wait', drained: 'off', offline: 'off', failed: 'bad', cordoned: 'wait' };

export function VerdictBadge({ verdict }: { verdict: string }) {
  return <span className={`badge badge-${VERDICT_TONE[verdict] ?? 'off'}`}>{verdict}</span>;
}

export function MachineStateBadge({ state }: { state: string }) {
  return <span className={`badge badge-${STATE_TONE[state] ?? 'off'}`}>{state}</span>;
}

export function EarningBadge({ earning }: { earning: boolean }) {
  return <span className={`badge ${earning ? 'badge-ok' : 'badge-bad'}`}>{earning ? 'Earning' : 'Not earning'}</span>;
}

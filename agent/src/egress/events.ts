import type { EgressRefusal } from './decision.js';

/**
 * One decision of the egress proxy. The proxy prints each as a JSON line on its stdout; the
 * agent follows the proxy container's log and writes each as a `system` line of the job
 * (`formatEgressEvent`), so the customer sees what the job reached and what was refused.
 * - `allowed`: a tunnel opened to `address` (the checked address, not the name again);
 * - `refused`: nothing was opened, `reason` says why;
 * - `closed`: a tunnel ended, with the bytes it carried each way and, when it did not end by
 *   one side closing it, why (`EgressEnd`).
 */
/** Why the proxy cut a tunnel: the job's byte budget ran out, idle too long, the proxy stopped, a socket error. */
export type EgressEnd = 'bytes' | 'idle' | 'shutdown' | 'error';

const END_TEXT: Readonly<Record<EgressEnd, string>> = {
  bytes: "cut: the job's byte budget is spent",
  idle: 'cut: idle too long',
  shutdown: 'cut: the proxy stopped (the job ended)',
  error: 'ended by a connection error',
};

export type EgressEvent =
  | { egress: 'allowed'; id: number; name: string; port: number; address: string }
  | { egress: 'refused'; name: string; port: number | null; reason: EgressRefusal; detail: string }
  | { egress: 'closed'; id: number; name: string; port: number; address: string; bytesOut: number; bytesIn: number; endedBy?: EgressEnd }
  | { egress: 'note'; message: string };

/** The text of a job's `system` line for one event. */
export function formatEgressEvent(event: EgressEvent): string {
  switch (event.egress) {
    case 'allowed':
      return `egress allowed ${event.name}:${event.port} (connection ${event.id} to ${event.address})`;
    case 'refused':
      return `egress refused ${event.name}${event.port === null ? '' : `:${event.port}`} (${event.reason}): ${event.detail}`;
    case 'closed':
      return `egress closed ${event.name}:${event.port} (connection ${event.id}): ${event.bytesOut} bytes sent, ${event.bytesIn} bytes received${event.endedBy ? `; ${END_TEXT[event.endedBy]}` : ''}`;
    case 'note':
      return `egress: ${event.message}`;
  }
}

/** The event on one line of the proxy's stdout, or null for anything else. */
export function parseEgressLine(line: string): EgressEvent | null {
  if (!line.startsWith('{"egress":')) return null;
  try {
    const value = JSON.parse(line) as EgressEvent;
    return typeof value === 'object' && value !== null && typeof value.egress === 'string' ? value : null;
  } catch {
    return null;
  }
}

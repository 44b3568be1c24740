/**
 * The runtime a finished run is billed for, in whole seconds (before the minimum billing).
 *
 * The server's own window (when it received the start, when it received the end) bounds what a
 * machine can charge: a machine whose clock says it started a day ago, or finishes a day from
 * now, gets no more than the server saw. The machine's own duration (its start and finish on its
 * own clock, so an offset between the clocks cancels out) is billed instead only when it is
 * shorter: the server's window also holds the network's delays, and a link down between the
 * container's exit and the report (an agent reconnecting with a finished run) that the machine
 * did not spend on the job. Never above `maxRuntimeSeconds`, never below 0.
 *
 * @example billedRuntimeSeconds({ server: { startedAt: t0, finishedAt: t0 + 95 s }, reported: { startedAt: a, finishedAt: a + 90 s }, maxRuntimeSeconds: 600 }) === 90
 */
export function billedRuntimeSeconds(params: {
  server: { startedAt: Date | null; finishedAt: Date };
  reported: { startedAt: Date | null; finishedAt: Date | null };
  maxRuntimeSeconds: number;
}): { billed: number; server: number; reported: number | null } {
  const { server, reported } = params;
  const serverSeconds = server.startedAt === null ? 0 : wholeSeconds(server.finishedAt.getTime() - server.startedAt.getTime());
  const reportedSeconds = reported.startedAt !== null && reported.finishedAt !== null ? wholeSeconds(reported.finishedAt.getTime() - reported.startedAt.getTime()) : null;
  const billed = Math.min(params.maxRuntimeSeconds, serverSeconds, reportedSeconds ?? serverSeconds);
  return { billed, server: serverSeconds, reported: reportedSeconds };
}

/** A duration in milliseconds as whole seconds, rounded up (a started second counts), never negative. */
function wholeSeconds(ms: number): number {
  return Number.isFinite(ms) ? Math.max(0, Math.ceil(ms / 1000)) : 0;
}

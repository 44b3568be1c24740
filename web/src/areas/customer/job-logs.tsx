import { LOG_STREAMS, type Job, type LogLine, type LogStream } from '@gpufarm/shared';
import { memo, useDeferredValue, useEffect, useMemo, useRef, useState } from 'react';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { saveBlob } from './save';

// Lines are kept in fixed chunks: a full chunk never changes, so a new batch re-renders only the last one.
const CHUNK = 500;

type Follow = { state: 'connecting' } | { state: 'live' } | { state: 'ended'; jobStatus: string } | { state: 'failed'; reason: string };

/** Appends lines as a batch per animation frame; the component re-renders once per batch, not per line. */
function useFollowedLines(jobId: string) {
  const { gf } = useApi();
  const chunks = useRef<LogLine[][]>([[]]);
  const [version, setVersion] = useState(0);
  const [follow, setFollow] = useState<Follow>({ state: 'connecting' });
  useEffect(() => {
    chunks.current = [[]];
    setVersion(0);
    const stop = new AbortController();
    let pending: LogLine[] = [];
    let frame: number | null = null;
    const flush = () => {
      frame = null;
      const all = chunks.current;
      // The last chunk is copied before lines are added: a chunk React rendered must keep its
      // lines, or its memoized rendering would miss those added once the batch has filled it.
      let last = [...all[all.length - 1]!];
      all[all.length - 1] = last;
      for (const line of pending) {
        if (last.length >= CHUNK) {
          last = [];
          all.push(last);
        }
        last.push(line);
      }
      pending = [];
      setVersion((v) => v + 1);
    };
    void (async () => {
      try {
        const lines = gf.followLogs(jobId, { signal: stop.signal });
        setFollow({ state: 'live' });
        for (;;) {
          const next = await lines.next();
          if (next.done) {
            if (frame !== null) cancelAnimationFrame(frame);
            flush();
            setFollow({ state: 'ended', jobStatus: next.value.jobStatus });
            return;
          }
          pending.push(next.value);
          frame ??= requestAnimationFrame(flush);
        }
      } catch (err) {
        if (!stop.signal.aborted) setFollow({ state: 'failed', reason: reasonOf(err) });
      }
    })();
    return () => {
      stop.abort();
      if (frame !== null) cancelAnimationFrame(frame);
    };
  }, [gf, jobId]);
  return { chunks: chunks.current, version, follow };
}

const LogChunk = memo(function LogChunk({ lines, streams, search }: { lines: LogLine[]; streams: ReadonlySet<LogStream>; search: string }) {
  const needle = search.toLowerCase();
  return (
    <>
      {lines.map((l) =>
        streams.has(l.stream) && (needle === '' || l.line.toLowerCase().includes(needle)) ? (
          <span key={l.id} className={`log-line log-${l.stream}`}>
            {l.line}
            {'\n'}
          </span>
        ) : null,
      )}
    </>
  );
});

const linesText = (count: number) => `${count} ${count === 1 ? 'line' : 'lines'}`;

function logText(chunks: LogLine[][]): string {
  return chunks.flatMap((chunk) => chunk.map((l) => `${l.at} ${l.stream} ${l.line}\n`)).join('');
}

/** Live logs: lines as they arrive (SSE through the SDK), stream filters, search, download. */
export function JobLogs({ job }: { job: Job }) {
  const api = useApi();
  const { chunks, version, follow } = useFollowedLines(job.id);
  const [streams, setStreams] = useState<ReadonlySet<LogStream>>(() => new Set(LOG_STREAMS));
  const [search, setSearch] = useState('');
  const deferredSearch = useDeferredValue(search);
  const [download, setDownload] = useState<string | null>(null);
  const total = useMemo(() => chunks.reduce((n, c) => n + c.length, 0), [chunks, version]);
  const logArtifact = job.artifacts.find((a) => a.id === job.result?.logArtifactId) ?? job.artifacts.find((a) => a.kind === 'log') ?? null;

  const downloadLog = async () => {
    setDownload(null);
    try {
      if (logArtifact) {
        const res = await api.fetch(`/dashboard/api/v1/artifacts/${encodeURIComponent(logArtifact.id)}`);
        if (!res.ok) throw new Error(`the stored log answered HTTP ${res.status}`);
        saveBlob(await res.blob(), logArtifact.filename);
      } else {
        saveBlob(new Blob([logText(chunks)], { type: 'text/plain' }), `${job.id}.log`);
      }
    } catch (err) {
      setDownload(`The log could not be downloaded: ${reasonOf(err)}. Try again.`);
    }
  };

  return (
    <section aria-labelledby="logs-heading" className="card">
      <h2 id="logs-heading">Logs</h2>
      <div className="log-tools">
        <fieldset className="inline">
          <legend className="visually-hidden">Streams</legend>
          {LOG_STREAMS.map((stream) => (
            <label key={stream} className="check">
              <input
                type="checkbox"
                checked={streams.has(stream)}
                onChange={(e) =>
                  setStreams((current) => {
                    const next = new Set(current);
                    if (e.target.checked) next.add(stream);
                    else next.delete(stream);
                    return next;
                  })
                }
              />
              {stream}
            </label>
          ))}
        </fieldset>
        <label className="field inline">
          <span>Search logs</span>
          <input type="search" value={search} onChange={(e) => setSearch(e.target.value)} />
        </label>
        <button type="button" onClick={() => void downloadLog()}>
          Download log
        </button>
      </div>
      <p className="muted" role="status">
        {follow.state === 'connecting'
          ? 'Connecting to the live log…'
          : follow.state === 'live'
            ? `${linesText(total)}, following live`
            : follow.state === 'ended'
              ? `${linesText(total)}; the job ended (${follow.jobStatus})`
              : `${linesText(total)}; following stopped: ${follow.reason} Reload the page to resume.`}
      </p>
      {download ? <p role="alert">{download}</p> : null}
      {total === 0 ? (
        <p className="empty">{follow.state === 'ended' ? 'This job wrote no log lines.' : 'No lines yet: they appear here as the job writes them.'}</p>
      ) : (
        // role="log": a screen reader hears new lines as they arrive, politely.
        <pre className="log" role="log" tabIndex={0} aria-label="Log lines">
          {chunks.map((lines, i) => (
            <LogChunk key={i} lines={lines} streams={streams} search={deferredSearch} />
          ))}
        </pre>
      )}
    </section>
  );
}

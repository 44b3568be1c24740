import { isTerminalStatus, type ArtifactSummary, type Job } from '@gpufarm/shared';
import { useEffect, useState } from 'react';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { bytes } from '../../lib/format';
import { EmptyState } from '../../ui/states';
import { Hash } from '../../ui/hash';
import { saveBlob } from './save';

type Check =
  | { state: 'idle' }
  | { state: 'working'; step: string }
  | { state: 'verified'; sha256: string; url: string; filename: string }
  | { state: 'mismatch'; computed: string; expected: { source: string; sha256: string }[] }
  | { state: 'failed'; reason: string };

async function sha256Hex(data: ArrayBuffer): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', data));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Output and log artifacts, each downloaded and checked in the browser against every recorded hash. */
export function JobArtifacts({ job }: { job: Job }) {
  const shown = job.artifacts.filter((a) => a.kind === 'output' || a.kind === 'log');
  return (
    <section aria-labelledby="artifacts-heading" className="card">
      <h2 id="artifacts-heading">Artifacts</h2>
      {shown.length === 0 ? (
        isTerminalStatus(job.status) ? (
          <EmptyState title="This job has no artifacts">
            <p>It ended without storing an output or a log.</p>
          </EmptyState>
        ) : (
          <EmptyState title="No artifacts yet">
            <p>The output and the stored log appear here when the job has finished.</p>
          </EmptyState>
        )
      ) : (
        <ul className="artifact-list">
          {shown.map((artifact) => (
            <ArtifactItem key={artifact.id} job={job} artifact={artifact} />
          ))}
        </ul>
      )}
    </section>
  );
}

function ArtifactItem({ job, artifact }: { job: Job; artifact: ArtifactSummary }) {
  const api = useApi();
  const [check, setCheck] = useState<Check>({ state: 'idle' });
  useEffect(() => () => (check.state === 'verified' ? URL.revokeObjectURL(check.url) : undefined), [check]);

  const verify = async () => {
    try {
      setCheck({ state: 'working', step: 'Reading the recorded hash…' });
      const metadata = await api.gf.artifacts.get(artifact.id);
      setCheck({ state: 'working', step: 'Downloading…' });
      // Follows the 302 to the signed URL (same origin with the filesystem store).
      const res = await api.fetch(`/dashboard/api/v1/artifacts/${encodeURIComponent(artifact.id)}`);
      if (!res.ok) throw new Error(`the download answered HTTP ${res.status}; try again`);
      const data = await res.arrayBuffer();
      setCheck({ state: 'working', step: 'Computing SHA-256…' });
      const computed = await sha256Hex(data);
      const expected = [
        { source: 'artifact record', sha256: metadata.sha256 },
        { source: 'job listing', sha256: artifact.sha256 },
        ...(artifact.kind === 'output' && job.result?.serverHash ? [{ source: "job result (server's hash)", sha256: job.result.serverHash }] : []),
        ...(res.headers.get('x-artifact-sha256') ? [{ source: 'X-Artifact-Sha256 header', sha256: res.headers.get('x-artifact-sha256')! }] : []),
      ];
      if (expected.some((e) => e.sha256.toLowerCase() !== computed)) {
        setCheck({ state: 'mismatch', computed, expected });
        return;
      }
      const url = saveBlob(new Blob([data]), artifact.filename);
      setCheck({ state: 'verified', sha256: computed, url, filename: artifact.filename });
    } catch (err) {
      setCheck({ state: 'failed', reason: reasonOf(err) });
    }
  };

  return (
    <li className="artifact">
      <div className="artifact-head">
        <strong>{artifact.filename}</strong> <span className="muted">({artifact.kind}, {bytes(artifact.sizeBytes)})</span>
      </div>
      <div>
        SHA-256 <Hash value={artifact.sha256} label={`SHA-256 of ${artifact.filename}`} />
      </div>
      <button type="button" onClick={() => void verify()} disabled={check.state === 'working'} aria-describedby={`artifact-${artifact.id}`}>
        Download and verify
      </button>
      <span id={`artifact-${artifact.id}`} className="visually-hidden">
        {artifact.filename}
      </span>
      {check.state === 'working' ? (
        <p role="status">
          <span className="spinner" aria-hidden="true" /> {check.step}
        </p>
      ) : check.state === 'verified' ? (
        <div className="verified" role="status" aria-label="Verified">
          <p>
            <strong>Verified</strong>: the bytes hash to <code className="hash-full">{check.sha256}</code>, as recorded.
          </p>
          <a href={check.url} download={check.filename}>
            Save {check.filename} again
          </a>
        </div>
      ) : check.state === 'mismatch' ? (
        <div className="integrity-error" role="alert" aria-label="Integrity error">
          <p>
            <strong>Integrity error</strong>: the downloaded bytes do not match the recorded hash, so the file is not offered. Do not use this file; contact support with the job id.
          </p>
          <p>
            Downloaded bytes: <code className="hash-full">{check.computed}</code>
          </p>
          {check.expected.map((e) => (
            <p key={e.source}>
              Recorded ({e.source}): <code className="hash-full">{e.sha256}</code>
            </p>
          ))}
        </div>
      ) : check.state === 'failed' ? (
        <p role="alert">The download failed: {check.reason}</p>
      ) : null}
    </li>
  );
}

import { isTerminalStatus, type ArtifactSummary, type Job, type OutputFile, type OutputFileList } from '@gpufarm/shared';
import { useQuery } from '@tanstack/react-query';
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
  | { state: 'mismatch'; computed: string; expected: Expected[] }
  | { state: 'failed'; reason: string };

/** A hash the downloaded bytes must equal, and where it was recorded. */
interface Expected {
  source: string;
  sha256: string;
}

async function sha256Hex(data: ArrayBuffer): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', data));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * Downloads bytes, hashes them in the browser and compares them with every recorded hash (and
 * the answer's X-Artifact-Sha256); the file is offered only when all agree.
 */
function useVerifiedDownload() {
  const api = useApi();
  const [check, setCheck] = useState<Check>({ state: 'idle' });
  useEffect(() => () => (check.state === 'verified' ? URL.revokeObjectURL(check.url) : undefined), [check]);
  const run = async (download: { path: string; filename: string; recorded: () => Promise<Expected[]> }) => {
    try {
      setCheck({ state: 'working', step: 'Reading the recorded hash…' });
      const recorded = await download.recorded();
      setCheck({ state: 'working', step: 'Downloading…' });
      const res = await api.fetch(download.path);
      if (!res.ok) throw new Error(`the download answered HTTP ${res.status}; try again`);
      const data = await res.arrayBuffer();
      setCheck({ state: 'working', step: 'Computing SHA-256…' });
      const computed = await sha256Hex(data);
      const header = res.headers.get('x-artifact-sha256');
      const expected = [...recorded, ...(header ? [{ source: 'X-Artifact-Sha256 header', sha256: header }] : [])];
      if (expected.some((e) => e.sha256.toLowerCase() !== computed)) {
        setCheck({ state: 'mismatch', computed, expected });
        return;
      }
      const url = saveBlob(new Blob([data]), download.filename);
      setCheck({ state: 'verified', sha256: computed, url, filename: download.filename });
    } catch (err) {
      setCheck({ state: 'failed', reason: reasonOf(err) });
    }
  };
  return { check, run };
}

function CheckOutcome({ check }: { check: Check }) {
  return check.state === 'working' ? (
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
  ) : null;
}

/** Output and log artifacts, each downloaded and checked in the browser against every recorded hash; the result's output with its file list. */
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
      {job.result?.outputArtifactId && job.result.serverHash ? <OutputFiles jobId={job.id} serverHash={job.result.serverHash} /> : null}
    </section>
  );
}

function ArtifactItem({ job, artifact }: { job: Job; artifact: ArtifactSummary }) {
  const api = useApi();
  const { check, run } = useVerifiedDownload();
  const verify = () =>
    run({
      // Follows the 302 to the signed URL (same origin with the filesystem store).
      path: `/dashboard/api/v1/artifacts/${encodeURIComponent(artifact.id)}`,
      filename: artifact.filename,
      recorded: async () => {
        const metadata = await api.gf.artifacts.get(artifact.id);
        return [
          { source: 'artifact record', sha256: metadata.sha256 },
          { source: 'job listing', sha256: artifact.sha256 },
          ...(artifact.kind === 'output' && job.result?.serverHash ? [{ source: "job result (server's hash)", sha256: job.result.serverHash }] : []),
        ];
      },
    });

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
      <CheckOutcome check={check} />
    </li>
  );
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** What the list leaves out, for a person: the files past the limit, links and special entries, unsafe names. */
function leftOut(list: OutputFileList): string[] {
  const notes: string[] = [];
  if (list.fileCount > list.files.length) notes.push(`${list.fileCount - list.files.length} more files (the list keeps the first ${list.files.length}; the whole output has them all)`);
  if (list.skipped.links > 0) notes.push(plural(list.skipped.links, 'link', 'links'));
  if (list.skipped.other > 0) notes.push(plural(list.skipped.other, 'special entry', 'special entries'));
  if (list.skipped.unsafeNames > 0) notes.push(plural(list.skipped.unsafeNames, 'file whose name is not a safe relative path', 'files whose names are not safe relative paths'));
  return notes;
}

/**
 * The files of the result's output tar, as the server listed them from the bytes that hash to
 * the result's hash; each downloaded alone and checked against its listed SHA-256.
 */
function OutputFiles({ jobId, serverHash }: { jobId: string; serverHash: string }) {
  const api = useApi();
  const list = useQuery({ queryKey: ['job-output-files', jobId, serverHash], queryFn: () => api.jobs.outputFiles(jobId) });
  if (list.isPending) return <p className="muted">Reading the output's file list…</p>;
  if (list.isError) return <p role="alert">The output's file list could not be read: {reasonOf(list.error)}</p>;
  const l = list.data;
  // Made from other bytes than the result names: its hashes would vouch for nothing here.
  if (l.tarSha256 !== serverHash) return <p role="alert">The file list was made from other bytes than the result's output ({l.tarSha256}); its files are not offered.</p>;
  if (l.state === 'unreadable') return <p className="muted">The output is not a tar the service could list ({l.reason}); download it whole above.</p>;
  const notes = leftOut(l);
  return (
    <div className="output-files">
      <h3 id={`files-${jobId}`}>Files in the output</h3>
      {l.files.length === 0 ? <p className="muted">The output holds no files.</p> : null}
      {notes.length > 0 ? <p className="muted">Not listed: {notes.join('; ')}.</p> : null}
      {l.files.length > 0 ? (
        <div className="table-wrap">
          <table aria-labelledby={`files-${jobId}`}>
            <thead>
              <tr>
                <th scope="col">File</th>
                <th scope="col">Size</th>
                <th scope="col">SHA-256</th>
                <th scope="col">
                  <span className="visually-hidden">Download</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {l.files.map((file) => (
                <OutputFileRow key={file.index} jobId={jobId} file={file} />
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </div>
  );
}

function OutputFileRow({ jobId, file }: { jobId: string; file: OutputFile }) {
  const { check, run } = useVerifiedDownload();
  const filename = file.path.slice(file.path.lastIndexOf('/') + 1);
  const verify = () =>
    run({
      path: `/dashboard/api/jobs/${encodeURIComponent(jobId)}/output/files/${file.index}`,
      filename,
      recorded: async () => [{ source: 'file list', sha256: file.sha256 }],
    });
  return (
    <tr>
      <th scope="row" className="file-path">
        <code>{file.path}</code>
      </th>
      <td className="file-size">{bytes(file.sizeBytes)}</td>
      <td>
        <Hash value={file.sha256} label={`SHA-256 of ${file.path}`} />
      </td>
      <td>
        <button type="button" onClick={() => void verify()} disabled={check.state === 'working'} aria-label={`Download and verify ${file.path}`}>
          Download and verify
        </button>
        <CheckOutcome check={check} />
      </td>
    </tr>
  );
}

import type { JobCreateRequest } from '@gpufarm/shared';
import { useEffect, useRef, type ChangeEvent } from 'react';
import { useApi } from '../../lib/api';
import { reasonOf } from '../../lib/errors';
import { bytes, shortHex } from '../../lib/format';
import { FieldErrors } from '../../ui/fields';

/** One input of the New job form: a file being uploaded, uploaded (its artifact), or failed. */
export interface InputRow {
  key: string;
  /** The file's name as picked, or the artifact id of an input carried from a job run again. */
  label: string;
  mountName: string;
  sizeBytes: number | null;
  /** Set once the upload is stored. */
  artifactId: string | null;
  sha256: string | null;
  /** Bytes sent while uploading; null once stored or failed. */
  sent: number | null;
  error: string | null;
}

/** The rows of a spec's inputs (a job run again, a template): stored already. */
export function inputRowsOf(inputs: JobCreateRequest['inputs']): InputRow[] {
  return (inputs ?? []).map((input) => ({ key: input.artifactId + input.mountName, label: input.artifactId, mountName: input.mountName, sizeBytes: null, artifactId: input.artifactId, sha256: null, sent: null, error: null }));
}

// The server's rules: a filename of letters, digits, dots, dashes or underscores (255 at most),
// a mount name the same at 64 at most; both start with a letter or digit.
const safeName = (name: string, max: number) => name.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^[^A-Za-z0-9]+/, '').slice(0, max) || 'input';

/** A mount name for `fileName` not yet used by `rows`: `data.csv`, then `data-2.csv`… */
function freeMountName(fileName: string, rows: readonly InputRow[]): string {
  const base = safeName(fileName, 64);
  const taken = new Set(rows.map((r) => r.mountName));
  if (!taken.has(base)) return base;
  const dot = base.lastIndexOf('.');
  const [stem, ext] = dot > 0 ? [base.slice(0, dot), base.slice(dot)] : [base, ''];
  for (let n = 2; ; n += 1) {
    const name = `${stem.slice(0, 64 - ext.length - String(n).length - 1)}-${n}${ext}`;
    if (!taken.has(name)) return name;
  }
}

/**
 * The job's inputs: files picked here are uploaded at once (`POST /v1/artifacts`, with their
 * progress) and mounted read-only at `/input/<mount name>` in the container.
 */
export function InputUploads({ rows, onRows, errors }: { rows: readonly InputRow[]; onRows: (update: (rows: InputRow[]) => InputRow[]) => void; errors: string[] }) {
  const api = useApi();
  const uploads = useRef(new Map<string, AbortController>());
  // Leaving the form stops the uploads still running: their files would be stored for no job.
  useEffect(() => {
    const running = uploads.current;
    return () => {
      for (const controller of running.values()) controller.abort();
    };
  }, []);
  const patch = (key: string, change: Partial<InputRow>) => onRows((all) => all.map((r) => (r.key === key ? { ...r, ...change } : r)));

  const add = (event: ChangeEvent<HTMLInputElement>) => {
    const files = [...(event.target.files ?? [])];
    event.target.value = '';
    const added: InputRow[] = [];
    for (const file of files) {
      const row: InputRow = { key: crypto.randomUUID(), label: file.name, mountName: freeMountName(file.name, [...rows, ...added]), sizeBytes: file.size, artifactId: null, sha256: null, sent: 0, error: null };
      added.push(row);
      const controller = new AbortController();
      uploads.current.set(row.key, controller);
      api
        .uploadInput(file, { filename: safeName(file.name, 255), onProgress: (sent) => patch(row.key, { sent }), signal: controller.signal })
        .then((stored) => patch(row.key, { artifactId: stored.id, sha256: stored.sha256, sizeBytes: stored.sizeBytes, sent: null }))
        .catch((err: unknown) => {
          if (!controller.signal.aborted) patch(row.key, { sent: null, error: reasonOf(err) });
        })
        .finally(() => uploads.current.delete(row.key));
    }
    onRows((all) => [...all, ...added]);
  };
  const remove = (key: string) => {
    uploads.current.get(key)?.abort();
    onRows((all) => all.filter((r) => r.key !== key));
  };

  return (
    <fieldset className="field" aria-describedby="inputs-hint">
      <legend>Inputs</legend>
      <p id="inputs-hint" className="muted">
        Files for the job, uploaded now and mounted read-only at /input/&lt;mount name&gt;. The machine checks each one against its SHA-256 before the job starts.
      </p>
      {rows.length > 0 ? (
        <ul className="input-rows">
          {rows.map((row) => (
            <li key={row.key}>
              <label className="field inline">
                <span>
                  Mount name for <strong>{row.label}</strong>
                </span>
                <input value={row.mountName} onChange={(e) => patch(row.key, { mountName: e.target.value })} />
              </label>
              {row.sent !== null ? (
                <span role="status">
                  <progress value={row.sent} max={row.sizeBytes ?? undefined} aria-label={`Uploading ${row.label}`} /> {row.sizeBytes ? `${Math.floor((100 * row.sent) / Math.max(row.sizeBytes, 1))} %` : bytes(row.sent)}
                </span>
              ) : row.error ? (
                <span className="field-error" role="alert">
                  {row.label} was not uploaded: {row.error}
                </span>
              ) : (
                <span className="muted">
                  uploaded{row.sizeBytes !== null ? `, ${bytes(row.sizeBytes)}` : ''}
                  {row.sha256 ? `, SHA-256 ${shortHex(row.sha256)}` : ''}
                </span>
              )}{' '}
              <button type="button" className="button-small" onClick={() => remove(row.key)}>
                Remove {row.label}
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      <label className="field inline">
        <span>Add input files</span>
        <input type="file" multiple onChange={add} />
      </label>
      <FieldErrors id="inputs-errors" errors={errors} />
    </fieldset>
  );
}

import { isTerminalStatus, JOB_STATUSES, type Job, type JobStatus, type JobSummary } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { duration, usd, whenShort } from '../../lib/format';
import { Page } from '../../ui/page';
import { QueryState } from '../../ui/query-state';
import { Pager, Table, useCursorPages } from '../../ui/table';
import { StatusBadge } from './status-badge';

const PAGE_SIZE = 25;

/** What a job costs so far: the final cost once known, else the estimate's upper bound. */
function costOf(job: Job): string {
  if (job.cost) return usd(job.cost.totalMicroUsd);
  return `up to ${usd(job.pricing.maxCostMicroUsd)}`;
}

/** How long the job ran: from its start to its end, or until now while it runs; a dash before it starts. */
function ranFor(job: Job, now: number): string {
  const started = job.assignment?.startedAt;
  if (!started) return '—';
  const ended = job.assignment?.finishedAt ?? (isTerminalStatus(job.status) ? null : new Date(now).toISOString());
  if (!ended) return '—';
  return duration(Math.max(0, (Date.parse(ended) - Date.parse(started)) / 1000));
}

/** An image reference as a person scans it: the repository's last part and tag, the digest shortened. */
function shortImage(image: string): string {
  const [name = image, digest] = image.split('@');
  const last = name.split('/').at(-1) ?? name;
  return digest ? `${last}@${digest.replace(/^sha256:/, '').slice(0, 8)}…` : last;
}

/** The account's jobs, newest first, filtered by status and paged by cursor. */
export function JobsPage() {
  const api = useApi();
  const { gf } = api;
  const [status, setStatus] = useState<JobStatus | ''>('');
  const pages = useCursorPages();
  const { cursor } = pages;
  const jobs = useQuery({
    queryKey: ['jobs', status, cursor],
    queryFn: () => gf.jobs.list({ limit: PAGE_SIZE, cursor, ...(status ? { status: [status] } : {}) }),
    placeholderData: keepPreviousData,
    refetchInterval: 10_000,
  });
  const ids = jobs.data?.data.map((job) => job.id) ?? [];
  // The list's title, image and creation time: dashboard only, one call per page.
  const summaries = useQuery({ queryKey: ['job-summaries', ids], queryFn: () => api.jobs.summaries(ids), enabled: ids.length > 0, staleTime: Infinity, placeholderData: keepPreviousData });
  const summaryOf = (job: Job): JobSummary | undefined => summaries.data?.data.find((s) => s.jobId === job.id);
  const now = Date.now();
  return (
    <Page
      title="Jobs"
      actions={
        <Link href="/jobs/new" className="button-link primary">
          New job
        </Link>
      }
    >
      <div className="filters">
        <label className="field">
          <span>Status</span>
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.target.value as JobStatus | '');
              pages.reset();
            }}
          >
            <option value="">All statuses</option>
            {JOB_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
      </div>
      <QueryState
        query={jobs}
        loading="Loading your jobs…"
        errorTitle="Could not load your jobs"
        isEmpty={(page) => page.data.length === 0}
        empty={{
          title: status ? `No ${status} jobs` : 'No jobs yet',
          body: (
            <p>
              <Link href="/jobs/new">Create a job</Link> here, or with an <Link href="/keys">API key</Link>: the SDK (createClient().jobs.create), the gf command line (gf run) or POST /v1/jobs (<a href="/docs">API reference</a>). It appears here as soon as it exists.
            </p>
          ),
        }}
      >
        {(page) => (
          <>
            <Table
              caption="Jobs"
              rows={page.data}
              rowKey={(job) => job.id}
              columns={[
                {
                  header: 'Job',
                  cell: (job) => (
                    <>
                      <Link href={`/jobs/${encodeURIComponent(job.id)}`}>{job.id}</Link>
                      {summaryOf(job)?.title ? <span className="cell-note">{summaryOf(job)!.title}</span> : null}
                    </>
                  ),
                },
                { header: 'Status', cell: (job) => <StatusBadge job={job} /> },
                { header: 'Created', cell: (job) => whenShort(summaryOf(job)?.createdAt) },
                { header: 'Image', cell: (job) => (summaryOf(job)?.image ? <code title={summaryOf(job)!.image!}>{shortImage(summaryOf(job)!.image!)}</code> : '—') },
                { header: 'GPU', cell: (job) => (job.assignment ? `${job.assignment.gpu.count} × ${job.assignment.gpu.model}` : <span className="muted">not assigned</span>) },
                { header: 'Ran for', cell: (job) => ranFor(job, now), className: 'num' },
                { header: 'Cost', cell: costOf, className: 'num' },
              ]}
            />
            <Pager pages={pages} nextCursor={page.nextCursor} busy={jobs.isFetching} />
          </>
        )}
      </QueryState>
    </Page>
  );
}

import { JOB_STATUSES, type Job, type JobStatus } from '@gpufarm/shared';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { useApi } from '../../lib/api';
import { usd } from '../../lib/format';
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

/** The account's jobs, newest first, filtered by status and paged by cursor. */
export function JobsPage() {
  const { gf } = useApi();
  const [status, setStatus] = useState<JobStatus | ''>('');
  const pages = useCursorPages();
  const { cursor } = pages;
  const jobs = useQuery({
    queryKey: ['jobs', status, cursor],
    queryFn: () => gf.jobs.list({ limit: PAGE_SIZE, cursor, ...(status ? { status: [status] } : {}) }),
    placeholderData: keepPreviousData,
    refetchInterval: 10_000,
  });
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
                { header: 'Job', cell: (job) => <Link href={`/jobs/${encodeURIComponent(job.id)}`}>{job.id}</Link> },
                { header: 'Status', cell: (job) => <StatusBadge job={job} /> },
                { header: 'GPU', cell: (job) => (job.assignment ? `${job.assignment.gpu.count} × ${job.assignment.gpu.model}` : <span className="muted">not assigned</span>) },
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

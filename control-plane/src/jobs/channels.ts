/** NOTIFY channel raised when a job enters QUEUED (fund-confirm, a retry): wakes the matchers at once. */
export const JOBS_QUEUED_CHANNEL = 'jobs_queued';

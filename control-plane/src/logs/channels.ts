/**
 * NOTIFY channel raised (by triggers, migration 008) when lines of a job are stored or its status
 * changes, delivered at commit; the payload is the job id. The live log streams wait on it.
 */
export const JOB_LOG_CHANNEL = 'job_log';

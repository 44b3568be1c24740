import { join } from 'node:path';
import { systemWriter } from '../container-supervisor.js';
import { LogFile } from '../log-file.js';
import type { JobHook } from './hook.js';

/** The job's log file and the writer of the agent's lines; once the job runs, its supervisor owns the file. */
export function logHook(deps: { logKeepBytes: number; now: () => number }): JobHook {
  return {
    name: 'log',
    async prerun(job) {
      const { file } = await LogFile.open(join(job.dir, 'log.jsonl'), deps.logKeepBytes);
      job.log = file;
      job.system = systemWriter(file, job.sink, deps.now);
    },
    async poststop(job) {
      await job.log?.close();
    },
  };
}

import type { RuntimeDeps } from '../deps.js';
import { containerHook } from './container-hook.js';
import { egressHook } from './egress-hook.js';
import { folderHook } from './folder-hook.js';
import type { HookStep } from './hook.js';
import { imageHook } from './image-hook.js';
import { inputsHook } from './inputs-hook.js';
import { logHook } from './log-hook.js';
import { outputHook } from './output-hook.js';
import { startHook } from './start-hook.js';
import { userHook } from './user-hook.js';

export { runPoststops, runPreruns, need, type HookStep, type JobHook, type JobRef, type JobSetup, type JobSlots } from './hook.js';

/**
 * A job's start, step by step: its folder, its log, /output (mounting in the background), the
 * image beside the inputs, the egress network, the container, its user, the start. A failed step
 * undoes the ones before it, last first; `release` undoes them all.
 */
export function jobHooks(deps: RuntimeDeps, opts: { now: () => number; logKeepBytes: number }): HookStep[] {
  return [
    folderHook(),
    logHook(opts),
    outputHook(deps),
    [imageHook(deps), inputsHook(deps)],
    egressHook(deps),
    containerHook(deps),
    userHook(),
    startHook(opts),
  ];
}

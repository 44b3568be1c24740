import { type ChildProcess } from 'node:child_process';
/** Registers `fn` (synchronous) to run if the process ends before the returned function is called. */
export declare function onEmergencyExit(fn: () => void): () => void;
/** One child process of a test: its output kept in memory, stopped by its own pid. */
export interface TestProcess {
    name: string;
    child: ChildProcess;
    pid: number;
    /** Everything it printed so far, stdout and stderr interleaved as received. */
    output(): string;
    /** The last `lines` lines of its output, each prefixed with its name. */
    tail(lines?: number): string;
    /** Resolves with the exit code (null when killed by a signal). */
    exited: Promise<number | null>;
    running(): boolean;
    /** Waits until its output matches, failing with its output's tail when it exits or the time runs out. */
    waitForOutput(pattern: RegExp, what: string, timeoutMs?: number): Promise<RegExpExecArray>;
    /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
    stop(graceMs?: number): Promise<void>;
    /** SIGKILL at once; resolves when it has exited. */
    kill(): Promise<void>;
}
/**
 * Spawns `command args` with exactly `env` over this process's environment, keeps its output,
 * and returns a handle that stops it by its pid (never by name).
 */
export declare function spawnProcess(name: string, command: string, args: string[], options?: {
    env?: Record<string, string | undefined>;
    cwd?: string;
    /** In a process group of its own, which every signal (stop, kill) reaches whole, as `timeout` or a CI runner sends them. */
    processGroup?: boolean;
}): TestProcess;
/** Waits for `child` to exit, at most `timeoutMs`; true when it did. */
export declare function exitedWithin(child: ChildProcess, timeoutMs: number): Promise<boolean>;
/** Whether a process with this pid exists (signal 0 probes without sending anything). */
export declare function isAlive(pid: number): boolean;

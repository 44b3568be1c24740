import type Docker from 'dockerode';
import type { ResolvedImage } from '../docker/image.js';
import type { MachineFacts } from './container-config.js';

/** Seconds between SIGTERM and SIGKILL when a job is stopped (timeout, cancel). */
export const STOP_GRACE_SECONDS = 10;

/**
 * Told of the images jobs use (the agent's image cache, `image-cache/`): `pulled` when a start
 * pulled its image (before the container is created), `used` once a container started from it.
 */
export interface ImagePullObserver {
  pulled(assignmentId: string, requested: string, image: ResolvedImage): Promise<void>;
  used(imageId: string): Promise<void>;
}

/** What the runtime needs; wired once in the agent's main.ts. */
export interface RuntimeDeps {
  docker: Docker;
  machine: MachineFacts;
  /** Names this agent on its containers' labels (the machine id); only its own are touched. */
  owner: string;
  /** Where per-assignment folders live (inputs, output mount, log artifact, state). */
  stateDir: string;
  /** Overrides `STOP_GRACE_SECONDS`. */
  stopGraceSeconds?: number;
  /** false forces the watchdog instead of a loop-mounted /output (tests, hosts without loop devices). */
  allowLoopMounts?: boolean;
  /** Bytes of a job's log kept at each end of its log artifact (default `LOG_KEEP_BYTES`). */
  logKeepBytes?: number;
  /** Headers of an input download from `url` (the machine token when it is the control plane's). */
  inputHeaders?: (url: string) => Record<string, string>;
  /** The image cache, told of pulls and uses; none: images are pulled and never tracked. */
  images?: ImagePullObserver;
  clock?: () => number;
}

/** Options of `start` and `resume`. */
export interface SuperviseOptions {
  /** Lines up to this cursor's line in Docker's order (from the link's spool) are not sent to the sink again. */
  sinkAfter?: string | null;
  /**
   * `start` only: told when a pull begins (`pulling`, never for an image already on the
   * machine) and when the image is ready and the container is being made (`starting`); the
   * control plane times the start's phases by these reports.
   */
  phase?: (state: 'pulling' | 'starting') => void;
}

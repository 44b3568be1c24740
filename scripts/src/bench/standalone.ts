import { agentLinkSection } from './agent-link.js';
import { agentRuntimeSection } from './agent-runtime.js';
import { artifactUploadSection } from './artifact-upload.js';
import { egressSection } from './egress.js';

/**
 * A bench section that needs neither the seeded database nor the control-plane process (the
 * agent's runtime, log link and uploads). Each measures its subject beside its own baseline in
 * the same run and returns the lines of its table; `missed` lists the targets it did not meet.
 */
export interface StandaloneSection {
  name: string;
  run: (log: (line: string) => void) => Promise<StandaloneResult>;
}

export interface StandaloneResult {
  table: string[];
  missed: string[];
}

/** The registered sections, in the order they run (each lives in its own file under bench/). */
export const STANDALONE_SECTIONS: StandaloneSection[] = [];
STANDALONE_SECTIONS.push(agentLinkSection);
STANDALONE_SECTIONS.push(agentRuntimeSection);
STANDALONE_SECTIONS.push(artifactUploadSection);
STANDALONE_SECTIONS.push(egressSection);

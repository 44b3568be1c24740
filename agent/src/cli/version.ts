/** The agent package's version, kept equal to agent/package.json (the package test compares them). */
export const AGENT_VERSION = '0.1.0';

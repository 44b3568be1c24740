#!/usr/bin/env node
// gf-agent from this repository, with no build: the TypeScript entry point through tsx, like the
// repo's other entry points. The package's `bin` is dist/gf-agent.js, compiled by build.ts.
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');

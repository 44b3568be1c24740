#!/usr/bin/env node
// The gf-agent command: runs the TypeScript entry point through tsx, like the repo's other entry points.
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');

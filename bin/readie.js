#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx, so `npm install` needs no build step.
import { register } from 'tsx/esm/api';
import { preloadDependencies } from './preload.js';

await preloadDependencies();
register();
await import('../src/cli/readie.ts');

// Starts a thread of a parallel `replay verify` (verify-thread.ts) through tsx, which a worker
// thread does not inherit from the `register()` of bin/replay.js.
import { register } from 'tsx/esm/api';
import { preloadDependencies } from '../../bin/preload.js';

await preloadDependencies();
register();
await import('./verify-thread.ts');

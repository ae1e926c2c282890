/** A scripted echo worker in its own process, for the router benchmark: prints its address. */
import { ScriptedWorker } from '../../test/support/router/scripted-worker.js';

const worker = await ScriptedWorker.start({ workerId: process.argv[2] ?? 'bench-worker' });
process.stdout.write(`listening ${worker.address}\n`);
process.on('SIGTERM', () => {
  worker.stop();
  process.exit(0);
});

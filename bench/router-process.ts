/** A scripted router in its own process (as a real router would be), for the worker benchmark. */
import { ScriptedRouter } from '../test/support/scripted-router.js';

const router = await ScriptedRouter.start();
process.stdout.write(`${router.port}\n`);
process.stdin.resume();
process.stdin.on('end', () => void router.stop().then(() => process.exit(0)));

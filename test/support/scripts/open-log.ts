/**
 * Opens the LMDB event log in argv[2] (read-only when argv[3] is `read-only`) and says what
 * happened: `opened <lastSeq>`, or `refused: <message>` for an `EventLogError`. Run as a child so
 * that an open that crashes the process fails the test instead of ending the test run.
 */
import { EventLog, EventLogError } from '../../../src/events/index.js';

const [dir, mode] = process.argv.slice(2);
try {
  const log = EventLog.open(dir as string, { readOnly: mode === 'read-only' });
  process.stdout.write(`opened ${log.lastSeq}\n`);
  await log.close();
} catch (error) {
  if (!(error instanceof EventLogError)) throw error;
  process.stdout.write(`refused: ${error.message}\n`);
}

/**
 * A retention pass for the crash tests: opens the log in argv[2] (as the router does, with its
 * projection), archives into argv[3] with a day's retention by the clock argv[5] (epoch ms), and
 * kills itself with SIGKILL the first time it reaches the step argv[4] (`none`: never). Prints
 * `step NAME FROM-TO` for each step it passes and `done` at the end.
 */
import { EventLog } from '../../../src/events/index.js';
import { clusterProjection, type ClusterState } from '../../../src/projections/index.js';
import { archiverFor, DAY } from '../archive.js';

const [dir, archiveDir, dieAt = 'none', nowText] = process.argv.slice(2);
if (!dir || !archiveDir || !nowText) throw new Error('usage: archive-crash DIR ARCHIVE STEP NOW');
const now = Number(nowText);
const clock = { now: () => now, advance: () => undefined };
const log = EventLog.open<ClusterState>(dir, {
  projection: clusterProjection,
  clock: clock.now,
  snapshotEvery: 40,
});
const archiver = archiverFor(
  log,
  archiveDir,
  clock,
  { logRetentionMs: DAY },
  {
    onStep: (step, range) => {
      process.stdout.write(`step ${step} ${range.fromSeq}-${range.toSeq}\n`);
      if (step === dieAt) process.kill(process.pid, 'SIGKILL');
    },
  },
);
await archiver.pass();
await log.close();
process.stdout.write('done\n');

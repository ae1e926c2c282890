/**
 * The retention bench's `verify1MArchiveMs`: `replay verify` of an archive's first 1,000,000
 * events (read, checksum, decompress, decode, validate, fold, make every decision again) beside
 * the same events as JSONL, alternating rounds, in a process of its own as `replay verify` runs:
 * measured inside the bench's process, whose heap holds the simulated cluster and its logs, every
 * full collection of the verify's garbage walked that heap too and took twice the time.
 *
 * Run as a script, it is that process: `retention-verify.ts <events> <jsonl> <archive file...>`
 * prints its figures as JSON.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { readJsonl, writeJsonl, type ClusterEvent, type StoredEvent } from '../src/events/index.js';
import { Replayer } from '../replay/engine/replayer.js';
import { openLogSource } from '../replay/io/log-source.js';
import { defaultJobs, verifyLog } from '../replay/commands/verify-log.js';
import { availableParallelism } from 'node:os';
import { collectGarbage, ratio } from './support.js';

/** One verify's time, the CPU this process used in it, and what it reproduced. */
interface VerifyRun {
  readonly ms: number;
  readonly cpuMs: number;
  readonly calls: number;
  readonly decisions: number;
  readonly count: number;
}

/**
 * `replay verify` of the first `events` of the archive files (beside the same events written as
 * JSONL in `dir`), in a child process.
 */
export async function compareVerify(
  dir: string,
  archiveFiles: readonly string[],
  events = 1_000_000,
): Promise<Record<string, unknown>> {
  const jsonl = join(dir, 'verify.jsonl');
  const source = await openLogSource(archiveFiles);
  let lastSeq = 0;
  async function* first(): AsyncGenerator<StoredEvent> {
    let written = 0;
    for await (const stored of source.stored()) {
      yield stored;
      lastSeq = stored.event.seq;
      written += 1;
      if (written >= events) return;
    }
  }
  await writeJsonl(first(), jsonl);
  await source.close();
  const script = fileURLToPath(import.meta.url);
  const child = spawn(
    process.execPath,
    [
      '--expose-gc',
      '--import',
      'tsx',
      script,
      String(events),
      String(lastSeq),
      jsonl,
      ...archiveFiles,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`the verify process exited with ${code}: ${out}`);
  return JSON.parse(out) as Record<string, unknown>;
}

/** Verifies `batches` (their first `limit` events) as `replay verify` does. */
async function verifyOnce(
  batches: AsyncIterable<readonly ClusterEvent[]>,
  limit: number,
): Promise<VerifyRun> {
  let calls = 0;
  let decisions = 0;
  let diverged = 0;
  let count = 0;
  // As `replay verify` does: every call placed again, every other decision of the core made
  // again, each compared with what the log recorded.
  const replayer = new Replayer({
    onCall: (result) => {
      calls += 1;
      if (result.recorded === 'diverged') diverged += 1;
    },
    onDecision: (result) => {
      decisions += 1;
      if (result.recorded === 'diverged') diverged += 1;
    },
  });
  collectGarbage();
  const start = performance.now();
  const cpu = process.cpuUsage();
  reading: for await (const batch of batches) {
    for (const event of batch) {
      replayer.push(event);
      count += 1;
      if (count >= limit) break reading;
    }
  }
  replayer.end();
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  if (diverged > 0) throw new Error(`${diverged} decisions diverged`);
  return { ms, cpuMs: (used.user + used.system) / 1000, calls, decisions, count };
}

/**
 * `replay verify --jobs <jobs>` of the archive files up to `toSeq`, as the command runs it
 * (`verifyLog`): in up to `jobs` ranges, a thread each after the first.
 */
async function verifyArchive(
  archiveFiles: readonly string[],
  toSeq: number,
  jobs: number,
): Promise<VerifyRun & { ranges: number }> {
  collectGarbage();
  const start = performance.now();
  const cpu = process.cpuUsage();
  const outcome = await verifyLog(archiveFiles, { toSeq, jobs });
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  if (outcome.divergence || outcome.otherDivergence) throw new Error('a decision diverged');
  const { checked, unrecorded, others } = outcome.counts;
  return {
    ms,
    cpuMs: (used.user + used.system) / 1000,
    calls: checked + unrecorded,
    decisions: others,
    count: toSeq - (await firstSeq(archiveFiles)) + 1,
    ranges: outcome.ranges,
  };
}

async function firstSeq(archiveFiles: readonly string[]): Promise<number> {
  const source = await openLogSource(archiveFiles);
  try {
    return source.range?.first ?? 0;
  } finally {
    await source.close();
  }
}

/** Reading alone (no fold): what the encoding itself costs. */
async function readOnly(
  batches: AsyncIterable<readonly ClusterEvent[]>,
  limit: number,
): Promise<number> {
  collectGarbage();
  const start = performance.now();
  let count = 0;
  for await (const batch of batches) {
    count += batch.length;
    if (count >= limit) break;
  }
  return Math.round(performance.now() - start);
}

/** The JSONL file's events, one batch each (today's path: every line parsed). */
async function* jsonlBatches(path: string): AsyncGenerator<ClusterEvent[]> {
  for await (const { event } of readJsonl(path)) yield [event];
}

/** The child's work: alternating rounds of each, then reading alone. */
async function measure(
  limit: number,
  toSeq: number,
  jsonl: string,
  archiveFiles: readonly string[],
) {
  // `replay verify ./archive`'s path as it runs by default, in ranges on every core, and in one
  // pass (`--jobs 1`); each measured once a round, the default standing for whichever it equals.
  const jobs = { default: defaultJobs(), everyCore: availableParallelism(), onePass: 1 };
  const measured = [...new Set(Object.values(jobs))];
  const archive = new Map<number, (VerifyRun & { ranges: number })[]>(measured.map((n) => [n, []]));
  const jsonlRuns: VerifyRun[] = [];
  for (let round = 0; round < 2; round += 1) {
    jsonlRuns.push(await verifyOnce(jsonlBatches(jsonl), limit));
    for (const n of measured) archive.get(n)!.push(await verifyArchive(archiveFiles, toSeq, n));
  }
  const readJsonlMs = await readOnly(jsonlBatches(jsonl), limit);
  const readSource = await openLogSource(archiveFiles);
  const readArchiveMs = await readOnly(readSource.batches(0, undefined, true), limit);
  await readSource.close();
  const fastest = <T extends VerifyRun>(runs: T[]): T =>
    runs.reduce((a, b) => (b.ms < a.ms ? b : a));
  const runsOf = (n: number) => archive.get(n)!;
  const best = fastest(runsOf(jobs.default));
  const bestEveryCore = fastest(runsOf(jobs.everyCore));
  const bestOnePass = fastest(runsOf(jobs.onePass));
  const baseline = fastest(jsonlRuns);
  const million = best.count >= 1_000_000;
  return {
    // Of 1,000,000 events only when the archive held that many (the full run).
    verify1MArchiveMs: million ? Math.round(best.ms) : null,
    verify1MJsonlMs: million ? Math.round(baseline.ms) : null,
    verifyArchiveMs: Math.round(best.ms),
    verifyJsonlMs: Math.round(baseline.ms),
    verifyRatio: ratio(best.ms, baseline.ms),
    verify: {
      events: best.count,
      cores: jobs.everyCore,
      defaultJobs: jobs.default,
      ranges: best.ranges,
      callsReproduced: best.calls,
      otherDecisionsReproduced: best.decisions,
      onePassMs: Math.round(bestOnePass.ms),
      everyCoreMs: Math.round(bestEveryCore.ms),
      everyCoreRanges: bestEveryCore.ranges,
      everyCoreVsOnePass: ratio(bestEveryCore.ms, bestOnePass.ms),
      cpuMs: {
        archive: Math.round(best.cpuMs),
        archiveOnePass: Math.round(bestOnePass.cpuMs),
        archiveEveryCore: Math.round(bestEveryCore.cpuMs),
        jsonl: Math.round(baseline.cpuMs),
      },
      readOnlyMs: { archive: readArchiveMs, jsonl: readJsonlMs },
      rounds: {
        archiveMs: runsOf(jobs.default).map((run) => Math.round(run.ms)),
        archiveOnePassMs: runsOf(jobs.onePass).map((run) => Math.round(run.ms)),
        archiveEveryCoreMs: runsOf(jobs.everyCore).map((run) => Math.round(run.ms)),
        jsonlMs: jsonlRuns.map((run) => Math.round(run.ms)),
      },
      note: "read, check, decompress, decode, validate, fold, and make every decision again (calls and every other decision of the core), as replay verify does: the archive through the verify command's own pass (verifyLog) with its default --jobs (the cores less one: verify1MArchiveMs), in ranges on every core (everyCoreMs: cut at snapshots into ranges verified at once, a thread each, then joined) and in one pass (--jobs 1); the JSONL file by one replayer (the path before the archive); in a process of its own as replay verify runs; the best of two alternating rounds (cpuMs: the CPU that process used in it, in every thread)",
    },
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [limit, toSeq, jsonl, ...archiveFiles] = process.argv.slice(2);
  const figures = await measure(Number(limit), Number(toSeq), jsonl as string, archiveFiles);
  process.stdout.write(JSON.stringify(figures));
}

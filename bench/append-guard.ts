/**
 * `npm run bench -- append-guard`: what the LMDB log's lost-commit guard (`recent-writes.ts`)
 * costs on the append path. A log of 20,000 events takes 4,000 more appends of one event each,
 * awaited one by one (`single`), and 20,000 more in bursts of 100 appends per turn (`bursts`),
 * with the guard and with its check replaced by nothing (the baseline), rounds alternating, the
 * median of 3 each: events/s and this process's CPU time per 1,000 events (the commits
 * themselves run on lmdb's writer thread, so CPU time shows the guard's cost when fsync hides it
 * from the rate), each with its ratio. `check` times the guard's check itself per commit in the
 * `single` case, beside the time per awaited append and beside counting the last 4,096 keys (what
 * each check counted before it covered only the commits since the check before last).
 */
import { join } from 'node:path';
import { EventLog, type NewEvent } from '../src/events/index.js';
import { median, perSecond, ratio, timed, withTempDir } from './support.js';

const PREFILL = 20_000;
const SINGLE = 4_000;
const BURSTS = 200;
const BURST = 100;
const ROUNDS = 3;

const leaving = (n: number): NewEvent => ({ type: 'WorkerLeaving', workerId: `w${n}` });

/** Opens a filled log; `guard` false turns its after-commit check into nothing. */
async function filled(dir: string, guard: boolean): Promise<EventLog> {
  const log = EventLog.open(dir);
  for (let i = 0; i < PREFILL; i += 1000) {
    await log.append(Array.from({ length: 1000 }, (_, j) => leaving(i + j))).committed;
  }
  if (!guard) (log as unknown as { checkCommitted: () => void }).checkCommitted = () => undefined;
  return log;
}

/** One run's rate and CPU time. */
interface Figures {
  readonly rate: number;
  readonly cpuMsPer1000: number;
}

/** Times `work` appending `count` events: events/s and CPU ms per 1,000. */
async function measure(count: number, work: () => Promise<void>): Promise<Figures> {
  const cpu = process.cpuUsage();
  const ms = await timed(work);
  const used = process.cpuUsage(cpu);
  return {
    rate: perSecond(count, ms),
    cpuMsPer1000: Math.round(((used.user + used.system) / count) * 100) / 100,
  };
}

async function single(dir: string, guard: boolean): Promise<Figures> {
  const log = await filled(dir, guard);
  try {
    return await measure(SINGLE, async () => {
      for (let i = 0; i < SINGLE; i += 1) await log.append(leaving(i)).committed;
    });
  } finally {
    await log.close();
  }
}

async function bursts(dir: string, guard: boolean): Promise<Figures> {
  const log = await filled(dir, guard);
  try {
    return await measure(BURSTS * BURST, async () => {
      for (let b = 0; b < BURSTS; b += 1) {
        let last: Promise<void> | undefined;
        for (let i = 0; i < BURST; i += 1) last = log.append(leaving(i)).committed;
        await last;
      }
    });
  } finally {
    await log.close();
  }
}

/** The guard's own time per commit (its key count), and a count of the last 4,096 keys. */
async function check(dir: string) {
  const log = await filled(dir, true);
  const inner = log as unknown as {
    recent: { missing: (...args: unknown[]) => unknown };
    events: { getKeysCount(range: { start: number; end: number }): number };
  };
  const missing = inner.recent.missing.bind(inner.recent);
  let checkNs = 0n;
  let checks = 0;
  inner.recent.missing = (...args: unknown[]) => {
    const start = process.hrtime.bigint();
    try {
      return missing(...args);
    } finally {
      checkNs += process.hrtime.bigint() - start;
      checks += 1;
    }
  };
  try {
    const ms = await timed(async () => {
      for (let i = 0; i < SINGLE; i += 1) await log.append(leaving(i)).committed;
    });
    const last = log.lastSeq;
    const counting = await timed(() => {
      for (let i = 0; i < 1000; i += 1) {
        inner.events.getKeysCount({ start: last - 4095, end: last + 1 });
      }
    });
    const us = (n: number) => Math.round(n * 100) / 100;
    const checkUs = Number(checkNs) / 1000 / checks;
    return {
      checkUsPerCommit: us(checkUs),
      appendUs: us((ms * 1000) / SINGLE),
      checkOverAppend: ratio(checkUs, (ms * 1000) / SINGLE),
      count4096KeysUs: us(counting),
      checkOverCount4096: ratio(checkUs, counting),
    };
  } finally {
    await log.close();
  }
}

async function compare(work: (dir: string, guard: boolean) => Promise<Figures>) {
  const on: Figures[] = [];
  const off: Figures[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    off.push(await withTempDir((dir) => work(join(dir, 'log'), false)));
    on.push(await withTempDir((dir) => work(join(dir, 'log'), true)));
  }
  const rate = median(on.map((f) => f.rate));
  const rateBaseline = median(off.map((f) => f.rate));
  const cpu = median(on.map((f) => f.cpuMsPer1000));
  const cpuBaseline = median(off.map((f) => f.cpuMsPer1000));
  return {
    eventsPerSecond: rate,
    eventsPerSecondNoGuard: rateBaseline,
    rateRatio: ratio(rate, rateBaseline),
    cpuMsPer1000Events: cpu,
    cpuMsPer1000EventsNoGuard: cpuBaseline,
    cpuRatio: ratio(cpu, cpuBaseline),
  };
}

/** The benchmark. */
export async function run(): Promise<unknown> {
  return {
    single: await compare(single),
    bursts: await compare(bursts),
    check: await withTempDir((dir) => check(join(dir, 'log'))),
  };
}

/**
 * What a hostile client can make the router hold on the call path, measured on the real
 * `readie router` in its own process (its RSS from /proc), with one tenant's token:
 * - `halfSentFirstMessages`: 200 streams over 4 connections, each sending 3.94 MiB of a first
 *   message that never completes (the attack as first reported), then the same with 0.99 MiB
 *   each (the most a first message may be), in two waves with the attacker holding the streams
 *   open: the router's RSS growth at its peak and while held, after each wave, beside the bytes
 *   sent (the baseline: a router that holds what it is sent grows by about that much);
 * - `idleStreams`: 1,000 call streams over 4 connections that send nothing: how many the router
 *   still holds open once `FIRST_MESSAGE_TIMEOUT` has passed, and when the last one was ended;
 * - `idleConnections`: 1,000 TCP connections that never speak: how many are still open once
 *   `CONNECTION_IDLE_TIMEOUT` (shortened here) has passed, and when the last one was closed.
 * `STREAM_BENCH_ROUTER` names another `bin/readie.js` to measure instead (an older tree, say).
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import type { ClientHttp2Session } from 'node:http2';
import { connect as tcpConnect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  openRawCall,
  rawSession,
  sendPartialMessage,
  type RawCall,
} from '../test/support/router/raw-h2-calls.js';
import { ratio, waitServing, withTempDir } from './support.js';

const TENANT_TOKEN = 'bench-abuse-tenant-token-0123456789';
const MiB = 1024 * 1024;
const STREAMS = 200;
const IDLE_STREAMS = 1_000;
const IDLE_CONNECTIONS = 1_000;
const CONNECTIONS = 4;
/** Short enough for a bench run; the defaults are 10 s and 5 min. */
const SETTINGS = { FIRST_MESSAGE_TIMEOUT: '5s', CONNECTION_IDLE_TIMEOUT: '5s' };
const SETTLE_MS = 2_000;

function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * 1024;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** Opens `count` streams over `CONNECTIONS` connections; `send` writes on each (or nothing). */
function openStreams(
  address: string,
  count: number,
  send: (call: RawCall) => void,
): { sessions: ClientHttp2Session[]; calls: RawCall[]; ended: number[] } {
  const sessions = Array.from({ length: CONNECTIONS }, () => rawSession(address));
  const started = Date.now();
  const ended: number[] = [];
  const calls = Array.from({ length: count }, (_, index) => {
    const call = openRawCall(sessions[index % CONNECTIONS]!, TENANT_TOKEN);
    void call.status.then(() => ended.push(Date.now() - started));
    send(call);
    return call;
  });
  return { sessions, calls, ended };
}

/**
 * Two waves of `STREAMS` half-sent first messages, the attacker holding every stream open: the
 * router's RSS growth while it holds them (once the writes left, or the first-message deadline
 * passed) after each. A router that gives memory back takes the second wave in the same memory;
 * one that holds what it is sent grows by about the bytes sent and keeps them.
 */
async function halfSent(address: string, pid: number, claimed: number, bytesEach: number) {
  const before = rssBytes(pid);
  const waves = [];
  for (let wave = 0; wave < 2; wave += 1) {
    const writes: Promise<void>[] = [];
    const attack = openStreams(address, STREAMS, (call) => {
      writes.push(sendPartialMessage(call.stream, claimed, bytesEach));
    });
    const started = Date.now();
    let peak = before;
    const sampling = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 100);
    await Promise.race([Promise.all(writes), sleep(30_000)]);
    await sleep(Math.max(0, 5_000 + SETTLE_MS - (Date.now() - started)));
    clearInterval(sampling);
    waves.push({
      rssGrowthPeak: Math.max(peak, rssBytes(pid)) - before,
      rssGrowthHeld: rssBytes(pid) - before,
      streamsEndedByRouter: attack.ended.length,
      heldForMs: Date.now() - started,
    });
    for (const session of attack.sessions) session.destroy();
    await sleep(SETTLE_MS);
  }
  const sent = STREAMS * bytesEach;
  return {
    streams: STREAMS,
    messageBytesClaimed: claimed,
    bytesSentEach: bytesEach,
    bytesSentPerWave: sent,
    waves,
    peakGrowthPerByteSent: ratio(Math.max(...waves.map((w) => w.rssGrowthPeak)), sent),
  };
}

async function idleStreams(address: string) {
  const attack = openStreams(address, IDLE_STREAMS, () => undefined);
  await sleep(5_000 + SETTLE_MS);
  const ended = [...attack.ended].sort((a, b) => a - b);
  for (const session of attack.sessions) session.destroy();
  return {
    streams: IDLE_STREAMS,
    stillOpenAfterMs: 5_000 + SETTLE_MS,
    stillOpen: IDLE_STREAMS - ended.length,
    firstEndedAtMs: ended[0] ?? null,
    lastEndedAtMs: ended.length === IDLE_STREAMS ? (ended.at(-1) ?? null) : null,
  };
}

async function idleConnections(address: string) {
  const [host, port] = [address.split(':')[0]!, Number(address.split(':')[1])];
  const started = Date.now();
  const closed: number[] = [];
  const sockets: Socket[] = Array.from({ length: IDLE_CONNECTIONS }, () => {
    const socket = tcpConnect({ host, port });
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    socket.once('close', () => closed.push(Date.now() - started));
    return socket;
  });
  await sleep(5_000 + 5_000 + SETTLE_MS);
  for (const socket of sockets) socket.destroy();
  const sorted = [...closed].sort((a, b) => a - b);
  return {
    connections: IDLE_CONNECTIONS,
    stillOpenAfterMs: 5_000 + 5_000 + SETTLE_MS,
    stillOpen: IDLE_CONNECTIONS - closed.length,
    firstClosedAtMs: sorted[0] ?? null,
    lastClosedAtMs: closed.length === IDLE_CONNECTIONS ? (sorted.at(-1) ?? null) : null,
  };
}

/** Starts the router to measure, runs `body` against it, stops it. */
async function withRouter<T>(
  dir: string,
  body: (address: string, pid: number) => Promise<T>,
): Promise<T> {
  const bin =
    process.env.STREAM_BENCH_ROUTER ?? fileURLToPath(new URL('../bin/readie.js', import.meta.url));
  const tokens = join(dir, 'tokens');
  writeFileSync(tokens, `tenant abuser ${TENANT_TOKEN}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'router.token'), 'bench-abuse-router-token-0123456789\n', {
    mode: 0o600,
  });
  const address = `127.0.0.1:${await freePort()}`;
  const log = join(dir, `log-${address.split(':')[1]}`);
  const router = spawn(
    process.execPath,
    [
      bin,
      'router',
      '--listen',
      address,
      '--log',
      log,
      '--insecure',
      '--log-level',
      'warn',
      '--tokens-file',
      tokens,
      '--router-token-file',
      join(dir, 'router.token'),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...SETTINGS } },
  );
  try {
    await waitServing(address);
    await sleep(1_000);
    return await body(address, router.pid!);
  } finally {
    router.kill('SIGTERM');
    await new Promise((resolve) => router.once('exit', resolve));
  }
}

/** Runs the stream-abuse benchmark: each case on a router of its own. */
export async function run() {
  return withTempDir(async (dir) => {
    const firstReported = await withRouter(dir, (address, pid) =>
      halfSent(address, pid, 4 * MiB - 64, Math.round(3.94 * MiB)),
    );
    const largestAllowed = await withRouter(dir, (address, pid) =>
      halfSent(address, pid, MiB, Math.round(0.99 * MiB)),
    );
    const streams = await withRouter(dir, (address) => idleStreams(address));
    const connections = await withRouter(dir, (address) => idleConnections(address));
    return {
      router: process.env.STREAM_BENCH_ROUTER ?? 'this tree',
      settings: SETTINGS,
      halfSentFirstMessages: { firstReported, largestAllowed },
      idleStreams: streams,
      idleConnections: connections,
      note:
        'growth per byte sent near 1: the router holds what the attacker sends; a second wave ' +
        'that grows no further: memory came back; stillOpen 0: the router ended every stream ' +
        'or connection by itself',
    };
  });
}

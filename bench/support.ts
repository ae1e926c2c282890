/** Small helpers shared by the benchmarks. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { healthStatus } from '../src/net/health-client.js';

/** Milliseconds taken by `work` (awaited). */
export async function timed(work: () => unknown): Promise<number> {
  const start = performance.now();
  await work();
  return performance.now() - start;
}

/** Runs `body` with a fresh temporary directory, removed afterwards. */
export async function withTempDir<T>(body: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'readie-bench-'));
  try {
    return await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A rate in units per second, rounded. */
export function perSecond(count: number, ms: number): number {
  return Math.round((count * 1000) / ms);
}

/** `value / baseline`, rounded to three decimals. */
export function ratio(value: number, baseline: number): number {
  return Math.round((value / baseline) * 1000) / 1000;
}

/** Runs a full garbage collection when node was started with --expose-gc (the bench script is). */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** The nearest-rank percentile of `values` (`fraction` 0.5 is the median, 0.99 the p99). */
export function percentile(values: readonly number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[index] as number;
}

/** The median of `values` (the lower middle value of an even count). */
export function median(values: readonly number[]): number {
  return percentile(values, 0.5);
}

/**
 * The environment a benchmark's Python client runs in against `cluster`: the checkout's client,
 * the run's client token, plaintext on loopback, and `home` as its HOME.
 */
export function clientEnv(
  cluster: { readonly address: string; readonly credentials: { readonly clientToken: string } },
  home: string,
  root: string,
): NodeJS.ProcessEnv {
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: home,
    READIE_ADDRESS: cluster.address,
    READIE_INSECURE: '1',
    READIE_AUTH_TOKEN: cluster.credentials.clientToken,
    PYTHONPATH: join(root, 'python'),
  };
}

/**
 * Resolves once the gRPC server at `address` answers a health check `SERVING`; throws after
 * `attempts` checks 100 ms apart.
 */
export async function waitServing(address: string, attempts = 300): Promise<void> {
  for (let attempt = 0; attempt < attempts; attempt += 1) {
    const status = await healthStatus(address, '', 1_000).catch(() => undefined);
    if (status === 'SERVING') return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${address} never served`);
}

/**
 * What a worker checks before it registers: a usable state directory, a memory cgroup it can
 * create children in, and a sandbox that really starts. Each check returns what is wrong, in
 * words for the ERROR status, instead of throwing.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ContainerPool } from './containers/index.js';
import { MemoryCgroups } from './sandbox/index.js';

const SELF_TEST_MEMORY = 256 * 1024 * 1024;

/** Creates the containers directory under `stateDir` and empties it of an earlier run's files. */
export async function prepareStateDir(stateDir: string): Promise<string | null> {
  const containers = join(stateDir, 'containers');
  try {
    await mkdir(containers, { recursive: true, mode: 0o700 });
    for (const leftover of await readdir(containers)) {
      await rm(join(containers, leftover), { recursive: true, force: true });
    }
    return null;
  } catch (error) {
    return `the state directory ${stateDir} is unusable: ${(error as Error).message}`;
  }
}

/** Opens the worker's parent memory cgroup, killing containers an earlier run left in it. */
export async function openCgroups(
  parent: string,
  log: Logger,
): Promise<{ cgroups: MemoryCgroups } | { problem: string }> {
  try {
    const cgroups = await MemoryCgroups.open(parent);
    const stale = await cgroups.removeStale();
    if (stale.length > 0)
      log.warn({ containers: stale }, 'removed containers left by an earlier run');
    return { cgroups };
  } catch (error) {
    return { problem: (error as Error).message };
  }
}

/** Starts one cold container, waits for its executor's HELLO and destroys it. */
export async function sandboxSelfTest(pool: ContainerPool, log: Logger): Promise<string | null> {
  try {
    const { container, connection } = await pool.create(SELF_TEST_MEMORY, '');
    connection.close();
    await pool.destroy(container);
    if (!connection.hello.dns.ok) {
      log.warn({ dns: connection.hello.dns.detail }, 'DNS does not work in the sandbox');
    }
    return null;
  } catch (error) {
    return `the sandbox does not start: ${(error as Error).message}`;
  }
}

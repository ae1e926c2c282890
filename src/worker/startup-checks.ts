/**
 * What a worker checks before it registers: a usable state directory, cgroups it can create
 * children in, and a sandbox that really starts. Each check returns what is wrong, in words for
 * the ERROR status, instead of throwing.
 */
import { chmod, mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ContainerPool } from './containers/index.js';
import { findOnPath } from './packages/index.js';
import { ContainerCgroups } from './sandbox/index.js';

const SELF_TEST_MEMORY = 256 * 1024 * 1024;

/**
 * Makes the state directory and its containers directory (0700, readable by root only) and
 * empties the latter of an earlier run's files; returns the IDs of the containers that run left.
 */
export async function prepareStateDir(
  stateDir: string,
): Promise<{ leftovers: string[] } | { problem: string }> {
  const containers = join(stateDir, 'containers');
  try {
    await mkdir(containers, { recursive: true, mode: 0o700 });
    await chmod(stateDir, 0o700);
    await chmod(containers, 0o700);
    const leftovers = await readdir(containers);
    for (const leftover of leftovers) {
      await rm(join(containers, leftover), { recursive: true, force: true });
    }
    return { leftovers };
  } catch (error) {
    return { problem: `the state directory ${stateDir} is unusable: ${(error as Error).message}` };
  }
}

/**
 * Opens the worker's parent cgroup, killing the containers an earlier run of this worker left
 * (`leftovers`, from its state directory), and only those.
 */
export async function openCgroups(
  parent: string,
  leftovers: readonly string[],
  log: Logger,
): Promise<{ cgroups: ContainerCgroups } | { problem: string }> {
  try {
    const cgroups = await ContainerCgroups.open(parent);
    const stale = await cgroups.removeLeftovers(leftovers);
    if (stale.length > 0)
      log.warn({ containers: stale }, 'removed containers left by an earlier run');
    return { cgroups };
  } catch (error) {
    return { problem: (error as Error).message };
  }
}

/** The slirp4netns binary the egress mode needs, or what is wrong. */
export async function findSlirp4netns(): Promise<{ path: string } | { problem: string }> {
  const path = await findOnPath(
    'slirp4netns',
    `${process.env['PATH'] ?? '/usr/bin:/bin'}:/usr/sbin:/sbin`,
  );
  if (path) return { path };
  return {
    problem:
      '--network egress needs slirp4netns, which is not on PATH: apt-get install slirp4netns',
  };
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

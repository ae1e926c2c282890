/**
 * The egress mode's user-mode network stack: one slirp4netns per container, attached to the
 * container's network namespace once the container has made it. slirp4netns runs with
 * `--disable-host-loopback` (nothing on the host's 127.0.0.1, where the worker and a local router
 * listen, is reachable through it), its own sandbox and seccomp filter, and no API socket; it
 * exits when the worker's end of its exit pipe closes, so it never outlives the worker.
 */
import { spawn } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { ContainerCgroup } from './container-cgroup.js';

/** The egress network could not be attached; says why. */
export class EgressError extends Error {
  override readonly name = 'EgressError';
}

/** A running slirp4netns. */
export interface EgressLink {
  readonly pid: number;
  /** Stops it (it also stops by itself once the container's namespace is gone). */
  stop(): void;
}

/** How egress is attached. */
export interface EgressOptions {
  readonly slirp4netns: string;
  /** How long slirp4netns may take to configure the namespace. */
  readonly timeoutMs: number;
  readonly log: Logger;
}

/**
 * Attaches slirp4netns to the network namespace of `pid` (the container's first process) and
 * resolves once the namespace has its interface, address, route and DNS forwarder. slirp4netns
 * joins the container's cgroups: its buffers count against the container's memory.
 */
export async function attachEgress(
  pid: number,
  cgroup: ContainerCgroup,
  options: EgressOptions,
): Promise<EgressLink> {
  // Never configure the host's own namespace: the container must already have its own.
  const own = readlinkSync('/proc/self/ns/net');
  let theirs: string;
  try {
    theirs = readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    throw new EgressError(`the container's process ${pid} is gone`);
  }
  if (theirs === own) {
    throw new EgressError(`process ${pid} is still in the host's network namespace`);
  }
  const child = spawn(
    options.slirp4netns,
    [
      '--configure',
      '--mtu=65520',
      '--disable-host-loopback',
      '--enable-sandbox',
      '--enable-seccomp',
      '--ready-fd=3',
      '--exit-fd=4',
      String(pid),
      'tap0',
    ],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin' } },
  );
  const ready = child.stdio[3] as Readable;
  // fd 4 is the read end slirp4netns watches; the worker holds the write end until stop().
  const exitPipe = child.stdio[4] as NodeJS.WritableStream & { destroy(): void };
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    if (stderr.length < 2000) stderr += chunk.toString();
  });
  const stop = () => {
    exitPipe.destroy();
    child.kill('SIGKILL');
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(new EgressError(`slirp4netns did not get ready within ${options.timeoutMs} ms`)),
        options.timeoutMs,
      );
      ready.once('data', () => {
        clearTimeout(timer);
        resolve();
      });
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(new EgressError(`cannot run ${options.slirp4netns}: ${error.message}`));
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(
          new EgressError(
            `slirp4netns exited (${signal ?? `code ${code}`}) before it was ready: ${stderr.trim().split('\n').at(-1) ?? ''}`,
          ),
        );
      });
    });
    if (child.pid === undefined) throw new EgressError('slirp4netns has no pid');
    await cgroup.adopt(child.pid);
  } catch (error) {
    stop();
    throw error;
  }
  ready.destroy();
  child.stderr?.removeAllListeners('data');
  child.stderr?.resume();
  child.once('exit', (code, signal) =>
    options.log.debug({ pid, code, signal }, 'slirp4netns exited'),
  );
  return { pid: child.pid, stop };
}

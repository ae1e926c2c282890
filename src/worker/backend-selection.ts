/**
 * Choosing the restore backend at startup: CRIU where a real dump and restore of a container
 * works (the probe), the template backend otherwise, with the reason logged and reported; CRIU
 * asked for by name and unusable is a startup problem, not a quiet fallback.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { CriuBackend, TemplateBackend, type RestoreBackend } from './checkpoints/index.js';
import { ContainerPool, type SandboxContext } from './containers/index.js';
import { findOnPath } from './packages/index.js';
import type { ContainerCgroups } from './sandbox/index.js';

const run = promisify(execFile);

/** What backend selection needs. */
export interface BackendSelectionOptions {
  readonly python: string;
  readonly log: Logger;
  readonly cgroups: ContainerCgroups;
  readonly stateDir: string;
  /** The sandbox the probe's container runs in: the worker's own. */
  readonly sandbox: SandboxContext;
  readonly workerId: string;
  readonly buildTimeoutMs: number;
  readonly rebuildDelayMs: number;
  /** Deadline of the whole CRIU probe (check, dump, restore, HELLO). */
  readonly probeTimeoutMs: number;
}

/** The probe's verdict. */
export type CriuProbe =
  | { readonly ok: true; readonly criu: string; readonly version: string }
  | { readonly ok: false; readonly reason: string };

const PROBE_MEMORY = 256 * 1024 * 1024;

function lastLine(text: string): string {
  return text.trim().split('\n').filter(Boolean).at(-1) ?? '';
}

function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Probes CRIU for real: `criu check`, then dumps a seed executor and restores one container from
 * it into a sandbox, and reads its HELLO, all under `probeTimeoutMs`.
 */
export async function probeCriu(options: BackendSelectionOptions): Promise<CriuProbe> {
  const path = `${process.env['PATH'] ?? '/usr/bin:/bin'}:/usr/sbin:/sbin`;
  const criu = await findOnPath('criu', path);
  if (!criu) return { ok: false, reason: 'criu is not installed' };
  let version = 'unknown';
  try {
    const { stdout } = await run(criu, ['--version'], { timeout: 10_000 });
    version = /Version:\s*(\S+)/.exec(stdout)?.[1] ?? version;
    await run(criu, ['check'], { timeout: options.probeTimeoutMs });
  } catch (error) {
    const failure = error as { stderr?: string; stdout?: string; message: string };
    const said = lastLine(`${failure.stdout ?? ''}\n${failure.stderr ?? ''}`) || failure.message;
    return { ok: false, reason: `criu ${version} check failed: ${said}` };
  }
  const backend = new CriuBackend({
    criu,
    version,
    python: options.python,
    imagesDir: join(options.stateDir, 'criu-probe'),
    log: options.log,
    buildTimeoutMs: options.probeTimeoutMs,
  });
  const pool = new ContainerPool({
    workerId: options.workerId,
    stateDir: options.stateDir,
    maxContainers: 1,
    sandbox: options.sandbox,
    python: options.python,
    wheelDir: null,
    cgroups: options.cgroups,
    backend,
    idleTtlMs: 60_000,
    standbyPerCheckpoint: 0,
    standbyMemory: PROBE_MEMORY,
    dialTimeoutMs: options.probeTimeoutMs,
    report: () => undefined,
    log: options.log,
  });
  try {
    await withDeadline(
      (async () => {
        await backend.build({ id: 'probe', modules: [], restoreCost: 0 });
        const { connection, fallback } = await pool.create(PROBE_MEMORY, 'probe');
        connection.close();
        if (fallback !== null) throw new Error(fallback);
        if (connection.hello.checkpoint !== 'probe') {
          throw new Error('the restored executor does not know its checkpoint');
        }
      })(),
      options.probeTimeoutMs,
      'the dump and restore',
    );
    return { ok: true, criu, version };
  } catch (error) {
    return {
      ok: false,
      reason: `criu ${version} dump+restore failed: ${(error as Error).message}`,
    };
  } finally {
    await pool.close();
    await backend.close();
  }
}

/**
 * The backend to use for `choice`: criu only where its probe passed; else template for `auto`,
 * and for an explicit `criu` the probe's reason as a problem (the worker registers in ERROR).
 */
export async function selectBackend(
  choice: 'auto' | 'template' | 'criu',
  options: BackendSelectionOptions,
): Promise<RestoreBackend | { readonly problem: string }> {
  const template = (fallbackReason?: string) =>
    new TemplateBackend({
      python: options.python,
      log: options.log,
      buildTimeoutMs: options.buildTimeoutMs,
      rebuildDelayMs: options.rebuildDelayMs,
      ...(fallbackReason ? { fallbackReason } : {}),
    });
  if (choice === 'template') return template();
  const probe = await probeCriu(options);
  if (probe.ok) {
    options.log.info({ criu: probe.criu, version: probe.version }, 'criu probe passed');
    return new CriuBackend({
      criu: probe.criu,
      version: probe.version,
      python: options.python,
      imagesDir: join(options.stateDir, 'checkpoints'),
      log: options.log,
      buildTimeoutMs: options.buildTimeoutMs,
    });
  }
  if (choice === 'criu') {
    return { problem: `--restore-backend criu, but criu is unusable here: ${probe.reason}` };
  }
  options.log.warn(
    { reason: probe.reason },
    'the criu backend is unusable here; checkpoints use the template backend',
  );
  return template(`criu unusable: ${probe.reason}`);
}

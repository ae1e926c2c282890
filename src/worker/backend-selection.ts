/**
 * Choosing the restore backend at startup: CRIU where a real dump and restore of a container
 * works (the probe), the template backend otherwise, with the reason logged and reported; CRIU
 * asked for by name and unusable is a startup problem, not a quiet fallback.
 */
import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import {
  criuVersion,
  CriuBackend,
  kernelMapsVvarVclock,
  LAZY_PAGES_FROM,
  locateCriu,
  TemplateBackend,
  tooOldReason,
  type CriuLocation,
  type RestoreBackend,
} from './checkpoints/index.js';
import { ContainerPool, type SandboxContext } from './containers/index.js';
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
  /** `--criu` (WORKER_CRIU): the criu binary to use; null to look for one. */
  readonly criu: string | null;
  readonly buildTimeoutMs: number;
  readonly rebuildDelayMs: number;
  /** Deadline of the whole CRIU probe (check, dump, restore, HELLO). */
  readonly probeTimeoutMs: number;
}

/** The probe's verdict: the criu found and its version, or why it cannot be used. */
export type CriuProbe =
  | {
      readonly ok: true;
      readonly criu: string;
      readonly version: string;
      readonly foundBy: CriuLocation['foundBy'];
      /** Whether it can restore lazily (`criu check --feature uffd-noncoop`). */
      readonly lazyPages: boolean;
    }
  | { readonly ok: false; readonly reason: string; readonly version: string | null };

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
 * Probes CRIU for real: finds it (`--criu`, the installed prefix, PATH), refuses a version this
 * kernel cannot work with, runs `criu check`, then dumps a seed executor and restores one
 * container from it into a sandbox and reads its HELLO, all under `probeTimeoutMs`.
 */
export async function probeCriu(options: BackendSelectionOptions): Promise<CriuProbe> {
  const located = await locateCriu(options.criu, process.env['PATH'] ?? '/usr/bin:/bin');
  if ('problem' in located) return { ok: false, reason: located.problem, version: null };
  const criu = located.path;
  let version: string | null = null;
  let lazyPages = false;
  try {
    version = await criuVersion(criu);
    if (version === null) {
      return { ok: false, reason: `${criu} does not report a CRIU version`, version };
    }
    const tooOld = tooOldReason(criu, version, await kernelMapsVvarVclock());
    if (tooOld) return { ok: false, reason: tooOld, version };
    await run(criu, ['check'], { timeout: options.probeTimeoutMs });
    lazyPages = await run(criu, ['check', '--feature', 'uffd-noncoop'], { timeout: 10_000 }).then(
      () => true,
      () => false,
    );
  } catch (error) {
    const failure = error as { stderr?: string; stdout?: string; message: string };
    const said = lastLine(`${failure.stdout ?? ''}\n${failure.stderr ?? ''}`) || failure.message;
    return {
      ok: false,
      reason: `criu ${version ?? '(unknown version)'} check failed: ${said}`,
      version,
    };
  }
  const imagesDir = join(options.stateDir, 'criu-probe');
  const backend = new CriuBackend({
    criu,
    version,
    python: options.python,
    imagesDir,
    log: options.log,
    buildTimeoutMs: options.probeTimeoutMs,
    rebuildDelayMs: options.rebuildDelayMs,
    reuse: false,
    lazyPagesFrom: null,
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
    standbyMax: 0,
    memoryTotal: PROBE_MEMORY,
    standbyMemory: PROBE_MEMORY,
    dialTimeoutMs: options.probeTimeoutMs,
    report: () => undefined,
    log: options.log,
  });
  try {
    await withDeadline(
      (async () => {
        await backend.build({ id: 'probe', modules: [] });
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
    return { ok: true, criu, version, foundBy: located.foundBy, lazyPages };
  } catch (error) {
    return {
      ok: false,
      reason: `criu ${version} (${criu}) dump+restore failed: ${(error as Error).message}`,
      version,
    };
  } finally {
    await pool.close();
    await backend.close();
    await rm(imagesDir, { recursive: true, force: true });
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
      stateDir: options.stateDir,
      buildTimeoutMs: options.buildTimeoutMs,
      rebuildDelayMs: options.rebuildDelayMs,
      ...(fallbackReason ? { fallbackReason } : {}),
    });
  if (choice === 'template') return template();
  const probe = await probeCriu(options);
  if (probe.ok) {
    options.log.info(
      {
        criu: probe.criu,
        version: probe.version,
        foundBy: probe.foundBy,
        lazyPages: probe.lazyPages,
      },
      'criu probe passed: a real dump and restore worked',
    );
    return new CriuBackend({
      criu: probe.criu,
      version: probe.version,
      python: options.python,
      imagesDir: join(options.stateDir, 'checkpoints'),
      log: options.log,
      buildTimeoutMs: options.buildTimeoutMs,
      rebuildDelayMs: options.rebuildDelayMs,
      reuse: true,
      lazyPagesFrom: probe.lazyPages ? LAZY_PAGES_FROM : null,
    });
  }
  if (choice === 'criu') {
    return { problem: `--restore-backend criu, but criu is unusable here: ${probe.reason}` };
  }
  options.log.warn(
    { reason: probe.reason, version: probe.version },
    'the criu backend is unusable here; checkpoints use the template backend',
  );
  return template(`criu unusable: ${probe.reason}`);
}

/**
 * The CRIU restore backend (DESIGN.md §7): each checkpoint is an executor seed dumped once with
 * `criu dump`; each container is a `criu restore` of it into a fresh pid namespace, after which
 * the restored process enters its sandbox like a template's fork does. Used only when the probe
 * (probeCriu in backend-selection.ts) restored a real container end to end.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { CheckpointSpec } from '../../events/catalogue.js';
import {
  runZygote,
  startOneContainer,
  type ContainerProcess,
  type ContainerSpec,
} from '../sandbox/index.js';
import { RestoreError, type RestoreBackend } from './restore-backend.js';

/** How the CRIU backend runs. */
export interface CriuBackendOptions {
  readonly criu: string;
  /** e.g. "3.19" */
  readonly version: string;
  readonly python: string;
  /** Where checkpoint images live (one directory per checkpoint). */
  readonly imagesDir: string;
  readonly log: Logger;
  readonly buildTimeoutMs: number;
}

/** Restores containers from CRIU images. */
export class CriuBackend implements RestoreBackend {
  readonly description: string;
  private readonly images = new Map<string, string>();
  /** Restore helpers still running (each lives as long as its container). */
  private readonly helpers = new Set<ChildProcess>();

  constructor(private readonly options: CriuBackendOptions) {
    this.description = `criu ${options.version}`;
  }

  async build(checkpoint: CheckpointSpec): Promise<void> {
    const dir = join(this.options.imagesDir, checkpoint.id);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const { code, events } = await runZygote(
      { python: this.options.python, log: this.options.log },
      [
        '--checkpoint',
        checkpoint.id,
        '--modules',
        checkpoint.modules.join(','),
        '--criu',
        this.options.criu,
        '--criu-seed',
        dir,
      ],
      this.options.buildTimeoutMs,
    );
    const failed = events.find((event) => event.event === 'failed');
    if (code !== 0 || !events.some((event) => event.event === 'ready')) {
      throw new Error(
        failed && 'error' in failed
          ? failed.error
          : `the CRIU seed did not finish within ${this.options.buildTimeoutMs} ms (exit ${code})`,
      );
    }
    this.images.set(checkpoint.id, dir);
    this.options.log.info(
      { checkpointId: checkpoint.id, images: dir },
      'checkpoint dumped with criu',
    );
  }

  held(): string[] {
    return [...this.images.keys()].sort();
  }

  async restore(checkpointId: string, spec: ContainerSpec): Promise<ContainerProcess> {
    const dir = this.images.get(checkpointId);
    if (!dir) throw new RestoreError(`checkpoint ${checkpointId} is not held by this worker`);
    try {
      return await startOneContainer(
        { python: this.options.python, log: this.options.log },
        [
          '--criu',
          this.options.criu,
          '--criu-restore',
          dir,
          '--spec',
          JSON.stringify({ ...spec, checkpoint: checkpointId }),
        ],
        spec.container,
        (helper) => {
          this.helpers.add(helper);
          helper.once('exit', () => this.helpers.delete(helper));
        },
      );
    } catch (error) {
      throw new RestoreError(`criu restore of ${checkpointId} failed: ${(error as Error).message}`);
    }
  }

  onChange(): void {
    // Images do not die: the held set never changes after startup.
  }

  async close(): Promise<void> {
    // A restore that hangs (a criu that never returns) must not outlive the backend.
    for (const helper of this.helpers) helper.kill('SIGKILL');
    this.helpers.clear();
    this.images.clear();
    await rm(this.options.imagesDir, { recursive: true, force: true });
  }
}

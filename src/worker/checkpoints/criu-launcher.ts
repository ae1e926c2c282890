/**
 * The CRIU backend's resident launcher (criu_restore.py): one small Python process per worker
 * that forks a restorer per container, so a restore does not pay for starting Python. Started
 * on first use, and again if it died; the restorers of running containers outlive it.
 */
import {
  TemplateZygote,
  type ContainerProcess,
  type ContainerSpec,
  type ZygoteLaunch,
} from '../sandbox/index.js';

/** The restore request beside the container's spec. */
export interface CriuRestoreRequest {
  readonly checkpoint: string;
  /** The image directory. */
  readonly criuImages: string;
  /** Restore lazily (`criu lazy-pages`). */
  readonly criuLazy: boolean;
  /** An image's snapshot (image_restore.py), not a checkpoint's seed. */
  readonly imageSnapshot?: boolean;
}

/** Restores containers through the resident launcher. */
export class CriuLauncher {
  private launcher: Promise<TemplateZygote> | null = null;
  private closed = false;

  constructor(
    private readonly launch: ZygoteLaunch,
    private readonly criu: string,
    private readonly startTimeoutMs: number,
  ) {}

  /** Starts the launcher now, so that the first restore does not wait for it. */
  warm(): Promise<void> {
    return this.process().then(() => undefined);
  }

  /** Restores one container; resolves once it has a pid. */
  async restore(spec: ContainerSpec, request: CriuRestoreRequest): Promise<ContainerProcess> {
    const launcher = await this.process();
    return launcher.fork(spec, { ...request });
  }

  private process(): Promise<TemplateZygote> {
    if (this.closed) return Promise.reject(new Error('the worker is shutting down'));
    const pending = (this.launcher ??= TemplateZygote.launch(
      this.launch,
      ['--criu-launcher', '--criu', this.criu],
      { zygote: 'criu-launcher' },
      this.startTimeoutMs,
    ));
    return pending.then(
      (launcher) => {
        if (launcher.running) return launcher;
        if (this.launcher === pending) this.launcher = null;
        return this.process();
      },
      (error: Error) => {
        if (this.launcher === pending) this.launcher = null;
        throw error;
      },
    );
  }

  /** Stops the launcher (restorers of running containers are its children, not dependants). */
  async close(): Promise<void> {
    this.closed = true;
    const launcher = await this.launcher?.catch(() => null);
    this.launcher = null;
    if (launcher) {
      launcher.stop();
      await launcher.exited;
    }
  }
}

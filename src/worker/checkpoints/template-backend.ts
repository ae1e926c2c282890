/**
 * The template restore backend: one resident, pre-imported zygote per checkpoint forks each new
 * container. A template that dies is dropped (the worker reports its checkpoints
 * again) and rebuilt after a backoff.
 */
import { randomUUID } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { TemplateZygote, type ContainerProcess, type ContainerSpec } from '../sandbox/index.js';
import { RestoreError, type CheckpointBuild, type RestoreBackend } from './restore-backend.js';

/** How the template backend runs. */
export interface TemplateBackendOptions {
  readonly python: string;
  readonly log: Logger;
  /** Where a checkpoint's setup source is written for its template to read (root only). */
  readonly stateDir: string;
  /** How long a template may take to import its modules. */
  readonly buildTimeoutMs: number;
  /** First delay before rebuilding a dead template; doubles on each failure, up to 5 minutes. */
  readonly rebuildDelayMs: number;
  /** Why another backend was not used, if one was asked for (shown to operators). */
  readonly fallbackReason?: string;
}

const MAX_REBUILD_DELAY_MS = 300_000;

/** Restores checkpoints by forking resident template processes. */
export class TemplateBackend implements RestoreBackend {
  /** A template of a tenant's image would have imported it outside a sandbox: none is made. */
  readonly imageSnapshots = null;
  readonly description: string;
  private readonly templates = new Map<string, TemplateZygote>();
  private readonly listeners: (() => void)[] = [];
  private readonly rebuildTimers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(private readonly options: TemplateBackendOptions) {
    this.description = options.fallbackReason ? `template (${options.fallbackReason})` : 'template';
  }

  async build(checkpoint: CheckpointBuild): Promise<void> {
    const setupFile = checkpoint.setup
      ? join(this.options.stateDir, `setup-${randomUUID()}.py`)
      : undefined;
    if (setupFile) await writeFile(setupFile, checkpoint.setup!, { mode: 0o600 });
    const template = await TemplateZygote.start(
      { python: this.options.python, log: this.options.log },
      checkpoint.id,
      checkpoint.modules,
      this.options.buildTimeoutMs,
      setupFile,
    ).finally(() => (setupFile ? rm(setupFile, { force: true }) : undefined));
    if (this.closed) {
      template.stop();
      return;
    }
    this.templates.set(checkpoint.id, template);
    this.options.log.info(
      {
        checkpointId: checkpoint.id,
        modules: checkpoint.modules,
        importMs: template.ready.importMs,
      },
      'checkpoint template ready',
    );
    void template.exited.then(() => this.onTemplateExit(checkpoint, template));
    this.notify();
  }

  private onTemplateExit(checkpoint: CheckpointBuild, template: TemplateZygote): void {
    if (this.closed || this.templates.get(checkpoint.id) !== template) return;
    this.templates.delete(checkpoint.id);
    this.options.log.warn(
      { checkpointId: checkpoint.id },
      'checkpoint template died: its checkpoint is dropped until it is rebuilt',
    );
    this.notify();
    this.scheduleRebuild(checkpoint, this.options.rebuildDelayMs);
  }

  private scheduleRebuild(checkpoint: CheckpointBuild, delayMs: number): void {
    const timer = setTimeout(() => {
      this.rebuildTimers.delete(timer);
      if (this.closed) return;
      this.build(checkpoint).catch((error: Error) => {
        this.options.log.warn(
          { checkpointId: checkpoint.id, err: error.message },
          'rebuilding a checkpoint template failed; retrying later',
        );
        this.scheduleRebuild(checkpoint, Math.min(delayMs * 2, MAX_REBUILD_DELAY_MS));
      });
    }, delayMs);
    timer.unref();
    this.rebuildTimers.add(timer);
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  held(): string[] {
    return [...this.templates.entries()]
      .filter(([, template]) => template.running)
      .map(([id]) => id)
      .sort();
  }

  hasImage(): boolean {
    return false;
  }

  isResident(checkpointId: string): boolean {
    return this.templates.get(checkpointId)?.running === true;
  }

  async residentBytes(checkpointId: string): Promise<number> {
    const template = this.templates.get(checkpointId);
    if (!template?.running) return 0;
    const status = await readFile(`/proc/${template.pid}/status`, 'utf8').catch(() => '');
    return Number(/^VmRSS:\s*(\d+) kB$/m.exec(status)?.[1] ?? 0) * 1024;
  }

  async dropResident(checkpointId: string): Promise<void> {
    const template = this.templates.get(checkpointId);
    if (!template) return;
    // Deleted first: its exit is then not a death to rebuild after.
    this.templates.delete(checkpointId);
    template.stop();
    await template.exited;
    this.options.log.info(
      { checkpointId },
      'checkpoint template stopped: it has no image, so calls naming it start cold',
    );
    this.notify();
  }

  async restore(checkpointId: string, spec: ContainerSpec): Promise<ContainerProcess> {
    const template = this.templates.get(checkpointId);
    if (!template || !template.running) {
      throw new RestoreError(`checkpoint ${checkpointId} is not held by this worker`);
    }
    try {
      return await template.fork(spec);
    } catch (error) {
      throw new RestoreError(
        `forking checkpoint ${checkpointId}'s template failed: ${(error as Error).message}`,
      );
    }
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.rebuildTimers) clearTimeout(timer);
    this.rebuildTimers.clear();
    const exits = [...this.templates.values()].map((template) => {
      template.stop();
      return template.exited;
    });
    this.templates.clear();
    await Promise.all(exits);
  }
}

/** The interface both restore backends (template, criu) implement. */
import type { CheckpointSpec } from '../../events/catalogue.js';
import type { ContainerProcess, ContainerSpec } from '../sandbox/index.js';

/** A checkpoint could not be restored; the worker cold-starts instead and says so. */
export class RestoreError extends Error {
  override readonly name = 'RestoreError';
}

/** Builds checkpoints once and starts containers from them. */
export interface RestoreBackend {
  /** For operators: the backend and, where it replaced another, why (ReportStatus.restore_backend). */
  readonly description: string;
  /** Builds a checkpoint; rejects with the reason it cannot be built. */
  build(checkpoint: CheckpointSpec): Promise<void>;
  /** The IDs of the checkpoints that can be restored now, sorted. */
  held(): string[];
  /** Starts a container from a held checkpoint; rejects with a RestoreError. */
  restore(checkpointId: string, spec: ContainerSpec): Promise<ContainerProcess>;
  /** Calls `listener` whenever the held set changes after startup (a template died or came back). */
  onChange(listener: () => void): void;
  /** Stops every resident process of the backend. */
  close(): Promise<void>;
}

/** The interface both restore backends (template, criu) implement. */
import type { ContainerProcess, ContainerSpec } from '../sandbox/index.js';

/** A checkpoint could not be restored; the worker cold-starts instead and says so. */
export class RestoreError extends Error {
  override readonly name = 'RestoreError';
}

/** What a checkpoint is built from: a catalogue entry, with an optional setup. */
export interface CheckpointBuild {
  readonly id: string;
  readonly modules: readonly string[];
  /**
   * Python source run once after the imports, before the checkpoint is frozen (e.g. loading
   * weights); calls reach what it defines with `import readie_checkpoint`.
   */
  readonly setup?: string;
}

/** What an image's seed enters: the image as a container sees it. */
export interface ImageSeed {
  /** How calls name the image (`image:` and 16 hex digits). */
  readonly name: string;
  readonly imports: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** An image's memory snapshot on disk, as its backend restores it. */
export interface ImageSnapshot {
  readonly dir: string;
  /** Bytes on disk. */
  readonly bytes: number;
  /** The uid (and gid) the dumped process runs as: every container restored from it does too. */
  readonly uid: number;
  readonly dumpMs: number;
  readonly importMs: number;
}

/**
 * Memory snapshots of tenants' images (docs/images.md): a process that entered the image inside
 * its sandbox, dumped there, restored into each new container's sandbox. Only the CRIU backend
 * makes them.
 */
export interface ImageSnapshots {
  /** Dumps a seed that entered `seed` in a sandbox made from `spec` into the new directory `dir`. */
  dump(dir: string, spec: ContainerSpec, seed: ImageSeed): Promise<ImageSnapshot>;
  /** Reopens a snapshot an earlier run dumped into `dir`, or says why it cannot serve. */
  open(dir: string, seed: ImageSeed): Promise<ImageSnapshot | { readonly stale: string }>;
  /** Starts a container (its sandbox from `spec`, run as the snapshot's uid) from a snapshot. */
  restore(snapshot: ImageSnapshot, spec: ContainerSpec): Promise<ContainerProcess>;
}

/** Builds checkpoints and starts containers from them. */
export interface RestoreBackend {
  /** Memory snapshots of images, where the backend makes them; null where it does not. */
  readonly imageSnapshots: ImageSnapshots | null;
  /** For operators: the backend and, where it replaced another, why (ReportStatus.restore_backend). */
  readonly description: string;
  /**
   * Builds a checkpoint (or reuses a valid image of it from an earlier run), at startup or on
   * demand later (then the held set changes and `onChange` listeners hear it); rejects with the
   * reason it cannot be built.
   */
  build(checkpoint: CheckpointBuild): Promise<void>;
  /** The IDs of the checkpoints that can be restored now, sorted. */
  held(): string[];
  /** Whether the checkpoint has an image on disk to restore from (the `cached` tier). */
  hasImage(checkpointId: string): boolean;
  /** Whether the backend keeps something of the checkpoint in memory (a template: `resident`). */
  isResident(checkpointId: string): boolean;
  /** Bytes the backend keeps resident for the checkpoint (a template's RSS; 0 for an image). */
  residentBytes(checkpointId: string): Promise<number>;
  /**
   * Frees what the backend keeps of the checkpoint in memory; a checkpoint with an image stays
   * held and restores from it, one without is no longer held.
   */
  dropResident(checkpointId: string): Promise<void>;
  /** Starts a container from a held checkpoint; rejects with a RestoreError. */
  restore(checkpointId: string, spec: ContainerSpec): Promise<ContainerProcess>;
  /** Calls `listener` whenever the held set changes after startup (a template died or came back). */
  onChange(listener: () => void): void;
  /** Stops every resident process of the backend (images stay on disk). */
  close(): Promise<void>;
}

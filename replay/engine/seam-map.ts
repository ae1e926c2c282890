/**
 * One of the replayer's own maps (the calls it saw requested, where each was placed), kept so that
 * a replay of part of a log can be joined to the replay of the part before it.
 *
 * A replayer that starts at a snapshot inside a log (a range of a parallel verify) has never seen
 * the events before it, so an entry the replay before it holds is missing here, or seeded from
 * the snapshot. Such a map records every read of a key it did not itself write (`reads`) and
 * what it wrote (`written`): whoever holds the map the replay before ended with can then tell
 * whether every read found what the whole replay would have found (`seamHolds`), and make the map
 * the next range starts from (`joined`). Pure.
 */
import { isDeepStrictEqual } from 'node:util';

/** A read of a key the map never wrote, and what it found (undefined: nothing). */
export interface SeamRead<V> {
  readonly key: string;
  readonly found: V | undefined;
}

/** What a map wrote: each key's last value (undefined: deleted), and whether it was cleared. */
export interface SeamWrites<V> {
  readonly cleared: boolean;
  readonly entries: ReadonlyMap<string, V | undefined>;
}

/** A map that, when it `tracks`, records the reads and writes its seam is checked by. */
export class SeamMap<V> {
  private readonly map = new Map<string, V>();
  /** Keys written (set or deleted) since the start, with their last value, when tracking. */
  private readonly writes = new Map<string, V | undefined>();
  private readonly seamReads: SeamRead<V>[] = [];
  private cleared = false;

  constructor(private readonly tracks: boolean) {}

  get(key: string): V | undefined {
    const value = this.map.get(key);
    if (this.tracks && !this.cleared && !this.writes.has(key)) {
      this.seamReads.push({ key, found: value });
    }
    return value;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  set(key: string, value: V): void {
    this.map.set(key, value);
    if (this.tracks) this.writes.set(key, value);
  }

  /** Sets an entry a snapshot says it had: not a write of this replay's own. */
  seed(key: string, value: V): void {
    this.map.set(key, value);
  }

  /** Whether it holds `key`, unrecorded (for seeding). */
  holds(key: string): boolean {
    return this.map.has(key);
  }

  delete(key: string): void {
    this.map.delete(key);
    if (this.tracks) this.writes.set(key, undefined);
  }

  /** Empties it as the whole replay would (a new router): what was before is gone there too. */
  clear(): void {
    this.map.clear();
    if (!this.tracks) return;
    this.cleared = true;
    this.writes.clear();
  }

  /** Empties it for this replay alone (a snapshot replaces what it saw): not a write. */
  drop(): void {
    this.map.clear();
  }

  /** The reads of keys it never wrote, in order. */
  get reads(): readonly SeamRead<V>[] {
    return this.seamReads;
  }

  /** What it wrote since the start. */
  get written(): SeamWrites<V> {
    return { cleared: this.cleared, entries: this.writes };
  }

  /** Its entries now (for the map the next range is checked against). */
  entries(): ReadonlyMap<string, V> {
    return this.map;
  }
}

/** Whether every read found what the map the replay before ended with holds. */
export function seamHolds<V>(
  before: ReadonlyMap<string, V>,
  reads: readonly SeamRead<V>[],
): boolean {
  return reads.every((read) => isDeepStrictEqual(before.get(read.key), read.found));
}

/** The map a range ends with: the one it started from, with what it wrote. */
export function joined<V>(
  before: ReadonlyMap<string, V>,
  writes: SeamWrites<V>,
): ReadonlyMap<string, V> {
  const map = writes.cleared ? new Map<string, V>() : new Map(before);
  for (const [key, value] of writes.entries) {
    if (value === undefined) map.delete(key);
    else map.set(key, value);
  }
  return map;
}

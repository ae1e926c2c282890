/**
 * The writer's guard against a lost commit: the newest appends, kept until later commits show
 * they are still in the log, and the check that finds the ones that are not.
 *
 * Why a commit can be lost: lmdb-js 3.5's LMDB, when another process opens the environment,
 * stores the transaction id it read from the data file into the shared lock file after it has
 * mapped the file (`mdb_env_open2`). A commit made by the writer in between is then "forgotten":
 * the writer's next transaction starts from the id and root before it, and its commit replaces
 * that commit's meta page. The events of the lost transaction vanish from the log although their
 * commit succeeded. A reader that opens rarely makes this rare; a reader that opens and closes
 * over and over while the writer writes makes it happen within seconds.
 */

/** One stored event as the writer can store it again. */
export interface HeldWrite<T> {
  readonly seq: number;
  readonly write: T;
}

/** How many events the writer keeps to store again (older ones, if lost, stop the writer). */
export const HELD_EVENTS = 4096;

/**
 * The writes not yet seen committed, and the last `limit` seen committed, by contiguous seq; see
 * the module comment.
 */
export class RecentWrites<T> {
  private held: HeldWrite<T>[] = [];
  /** Index of the first write still kept (the ones before are forgotten). */
  private head = 0;

  constructor(private readonly limit = HELD_EVENTS) {}

  /** Keeps `write` (its seq follows the last one kept). */
  add(seq: number, write: T): void {
    this.held.push({ seq, write });
  }

  /** Forgets the writes with a seq up to `seq` (dropped from the log on purpose). */
  forgetThrough(seq: number): void {
    this.forgetBefore(seq + 1);
  }

  /** The first seq still kept, which `missing` checks from. */
  get firstKept(): number | undefined {
    return this.held[this.head]?.seq;
  }

  /**
   * After a commit through `committed`: forgets the writes older than the last `limit` committed,
   * then returns those up to `committed` whose seq `present` says is not in the log (it lists the
   * seqs in the log from `from` to `to`). Empty when none is missing. `count` (how many seqs the
   * log holds from `from` to `to`), when given, answers the usual case, nothing missing, without
   * listing the seqs.
   */
  missing(
    committed: number,
    present: (from: number, to: number) => Iterable<number>,
    count?: (from: number, to: number) => number,
  ): HeldWrite<T>[] {
    this.forgetBefore(committed - this.limit + 1);
    const first = this.firstKept;
    if (first === undefined || committed < first) return [];
    let held = 0;
    if (count) held = count(first, committed);
    else for (const _ of present(first, committed)) held += 1;
    if (held === committed - first + 1) return [];
    const found = new Set(present(first, committed));
    const lost: HeldWrite<T>[] = [];
    for (let i = this.head; i < this.held.length; i += 1) {
      const held = this.held[i] as HeldWrite<T>;
      if (held.seq > committed) break;
      if (!found.has(held.seq)) lost.push(held);
    }
    return lost;
  }

  private forgetBefore(seq: number): void {
    while (this.head < this.held.length && (this.held[this.head] as HeldWrite<T>).seq < seq) {
      this.head += 1;
    }
    if (this.head > this.limit) {
      this.held = this.held.slice(this.head);
      this.head = 0;
    }
  }
}

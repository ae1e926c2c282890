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
 *
 * What can be lost is the writer's last commit before the one that replaces it (LMDB keeps two
 * meta pages, and the stale id picks the one before the newest). The check after a commit
 * therefore covers what committed since the previous check and what that check covered: the
 * replaced commit is among them, since every commit is checked at once (its events together,
 * as lmdb resolves a transaction's writes together). A write is forgotten once a check found
 * everything present and a later check covered what followed it.
 */

/** One stored event as the writer can store it again. */
export interface HeldWrite<T> {
  readonly seq: number;
  readonly write: T;
}

/** The writes of the last two checks' commits and those not yet checked, by contiguous seq. */
export class RecentWrites<T> {
  private held: HeldWrite<T>[] = [];
  /** Index of the first write still kept (the ones before are forgotten). */
  private head = 0;
  /** The newest seq the last check that found nothing missing covered. */
  private checked = 0;

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
   * After a commit through `committed`: the kept writes up to `committed` that the log lacks
   * (`count` says how many seqs it holds from `from` to `to`, `present` lists them); empty when
   * none is. When none is, the writes the previous such check covered are forgotten.
   */
  missing(
    committed: number,
    count: (from: number, to: number) => number,
    present: (from: number, to: number) => Iterable<number>,
  ): HeldWrite<T>[] {
    const first = this.firstKept;
    if (first === undefined || committed < first) return [];
    if (count(first, committed) === committed - first + 1) {
      this.forgetBefore(this.checked + 1);
      this.checked = committed;
      return [];
    }
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
    // The array is cut now and then, not at each forget: most checks forget a few writes.
    if (this.head > 1024 && this.head * 2 > this.held.length) {
      this.held = this.held.slice(this.head);
      this.head = 0;
    }
  }
}

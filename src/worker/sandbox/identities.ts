/**
 * Each container's own uid and gid, from a configured range, claimed host-wide: a claim is a
 * file `<claims dir>/<uid>` created exclusively, naming the worker process and the container.
 * Workers on one host (two local clusters, say) may share a range; no two live containers ever
 * share a uid. A claim whose worker process is gone (a crash) is taken over.
 */
import { mkdirSync } from 'node:fs';
import { chmod, open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { UidRange } from '../core/sandbox/sandbox-policy.js';

/** Where claims live unless told otherwise: /run is a tmpfs, emptied at boot. */
export const DEFAULT_CLAIMS_DIR = '/run/readie/uids';

/** A container's user and group (the same number). */
export interface SandboxIdentity {
  readonly uid: number;
  readonly gid: number;
}

/** Hands out identities to containers and takes them back once the container is gone. */
export interface IdentitySource {
  claim(containerId: string): Promise<SandboxIdentity>;
  /**
   * Claims exactly `uid` for `holder` (an image's snapshot reopened after a restart runs as the
   * uid it was dumped with); false when it is outside the range or held by someone else.
   */
  claimExact(uid: number, holder: string): Promise<boolean>;
  release(identity: SandboxIdentity): Promise<void>;
}

/** Every uid of the range is held by a live container. */
export class IdentitiesExhaustedError extends Error {
  override readonly name = 'IdentitiesExhaustedError';
}

/** The start time of a process (field 22 of /proc/PID/stat), or null when it is gone. */
export async function processStartTime(pid: number): Promise<string | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

interface Claim {
  readonly pid: number;
  readonly start: string;
  readonly container: string;
}

/** Claims uids from a range through exclusive files in a host-wide directory. */
export class UidClaims implements IdentitySource {
  private cursor: number;
  private ownStart: string | null = null;

  private constructor(
    private readonly range: UidRange,
    private readonly dir: string,
    /** Where the search starts: spreads workers sharing a range over it. */
    offset: number,
  ) {
    this.cursor = offset % range.count;
  }

  /** Opens the claims directory (created 0700); throws when it cannot be written. */
  static async open(range: UidRange, dir = DEFAULT_CLAIMS_DIR): Promise<UidClaims> {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
    const claims = new UidClaims(range, dir, process.pid * 7919);
    claims.ownStart = await processStartTime(process.pid);
    return claims;
  }

  async claim(containerId: string): Promise<SandboxIdentity> {
    const { first, count } = this.range;
    for (let tried = 0; tried < count; tried += 1) {
      const uid = first + this.cursor;
      this.cursor = (this.cursor + 1) % count;
      if (await this.take(uid, containerId)) return { uid, gid: uid };
    }
    throw new IdentitiesExhaustedError(
      `all ${count} sandbox uids from ${first} are held by live containers: widen --sandbox-uids`,
    );
  }

  async claimExact(uid: number, holder: string): Promise<boolean> {
    const { first, count } = this.range;
    if (!Number.isInteger(uid) || uid < first || uid >= first + count) return false;
    return this.take(uid, holder);
  }

  private async take(uid: number, containerId: string): Promise<boolean> {
    const path = join(this.dir, String(uid));
    const body = JSON.stringify({ pid: process.pid, start: this.ownStart, container: containerId });
    for (let attempt = 0; attempt < 2; attempt += 1) {
      try {
        const file = await open(path, 'wx', 0o600);
        await file.writeFile(body);
        await file.close();
        return true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      if (!(await this.abandoned(path))) return false;
      await rm(path, { force: true });
    }
    return false;
  }

  /** Whether a claim's worker process is gone (then nothing of its container runs either). */
  private async abandoned(path: string): Promise<boolean> {
    let claim: Claim;
    try {
      claim = JSON.parse(await readFile(path, 'utf8')) as Claim;
    } catch {
      // Being written right now, or unreadable: not ours to take.
      return false;
    }
    if (claim.pid === process.pid) return false;
    const start = await processStartTime(claim.pid);
    return start === null || start !== claim.start;
  }

  async release(identity: SandboxIdentity): Promise<void> {
    await rm(join(this.dir, String(identity.uid)), { force: true });
  }
}

/** One identity for every container: the unhardened path the benchmark compares against. */
export class SharedIdentity implements IdentitySource {
  constructor(private readonly identity: SandboxIdentity) {}

  claim(): Promise<SandboxIdentity> {
    return Promise.resolve(this.identity);
  }

  claimExact(uid: number): Promise<boolean> {
    return Promise.resolve(uid === this.identity.uid);
  }

  release(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * A uid an image's snapshot holds and lends to every container restored from it (they all run as
 * the uid the snapshot was dumped with). It goes back to the range only once the image is gone
 * (`retire`) and no container it lent the uid to still runs.
 */
export class LentIdentity {
  private lent = 0;
  private retired = false;
  private released = false;

  constructor(
    readonly identity: SandboxIdentity,
    private readonly release: (identity: SandboxIdentity) => Promise<void>,
  ) {}

  /** Lends the uid to one container; the function gives it back (once) when the container is gone. */
  lend(): () => Promise<void> {
    if (this.released) throw new Error(`uid ${this.identity.uid} went back to the range`);
    this.lent += 1;
    let back = false;
    return () => {
      if (back) return Promise.resolve();
      back = true;
      this.lent -= 1;
      return this.settle();
    };
  }

  /** The image is gone: the uid goes back once no container holds it. */
  retire(): Promise<void> {
    this.retired = true;
    return this.settle();
  }

  private async settle(): Promise<void> {
    if (!this.retired || this.lent > 0 || this.released) return;
    this.released = true;
    await this.release(this.identity);
  }
}

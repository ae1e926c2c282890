/** What an operator chooses about every container's sandbox, and parsing it. Pure. */
import { parseSize, UnitParseError } from '../../../shared/units.js';

/** `none`: no network but the container's own loopback; `egress`: out through slirp4netns. */
export type NetworkMode = 'none' | 'egress';

/** The network modes, in `--help` order. */
export const NETWORK_MODES: readonly NetworkMode[] = ['none', 'egress'];

/** A range of host uids (and the gids of the same numbers) handed to containers. */
export interface UidRange {
  readonly first: number;
  readonly count: number;
}

/** How big a container's /tmp is: a share of its first call's budget, or a fixed size. */
export type TmpQuota = { readonly share: number } | { readonly bytes: number };

/** The sandbox settings of a worker. */
export interface SandboxPolicy {
  readonly network: NetworkMode;
  readonly uids: UidRange;
  /** Tasks (processes and threads) a container may hold at once. */
  readonly pidsLimit: number;
  readonly tmpQuota: TmpQuota;
  /** Host directories masked in every container besides the worker's state directory. */
  readonly hide: readonly string[];
  /**
   * False only for the benchmark's baseline: the sandbox as it was before network, cgroup and
   * devpts namespaces, per-container uids, pids limits and the seccomp filter.
   */
  readonly hardened: boolean;
}

/** The default uid range: above the 16-bit range and the usual subordinate-uid blocks. */
export const DEFAULT_UIDS = '2000000000-2000065535';
/** The default pids limit. */
export const DEFAULT_PIDS_LIMIT = 1024;
/** The default /tmp quota. */
export const DEFAULT_TMP_QUOTA = '50%';
/** The smallest /tmp, whatever the budget: room for a small install. */
export const MIN_TMP_SIZE = 16 * 1024 * 1024;

/** A setting of the sandbox that does not parse; the message names the flag. */
export class SandboxSettingError extends Error {
  override readonly name = 'SandboxSettingError';
}

/** Parses `FIRST-LAST` (inclusive) into a range of at least one uid, all above 0. */
export function parseUidRange(text: string, flag = '--sandbox-uids'): UidRange {
  const match = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(text);
  const first = Number(match?.[1]);
  const last = Number(match?.[2]);
  if (!match || !Number.isSafeInteger(first) || !Number.isSafeInteger(last)) {
    throw new SandboxSettingError(`${flag} "${text}": expected FIRST-LAST, e.g. ${DEFAULT_UIDS}`);
  }
  // 2^32-1 is (uid_t)-1, "no change" to setresuid; 0 is root.
  if (first < 1 || last < first || last >= 2 ** 32 - 1) {
    throw new SandboxSettingError(
      `${flag} "${text}": FIRST must be at least 1, LAST at least FIRST and below 4294967295`,
    );
  }
  return { first, count: last - first + 1 };
}

/** Parses a /tmp quota: `N%` of the first call's budget (1-100), or a size such as `256MiB`. */
export function parseTmpQuota(text: string, flag = '--tmp-size'): TmpQuota {
  const percent = /^\s*(\d+(?:\.\d+)?)\s*%\s*$/.exec(text);
  if (percent) {
    const share = Number(percent[1]) / 100;
    if (share <= 0 || share > 1) {
      throw new SandboxSettingError(`${flag} "${text}": a share must be above 0% and at most 100%`);
    }
    return { share };
  }
  try {
    return { bytes: parseSize(text) };
  } catch (error) {
    if (error instanceof UnitParseError) {
      throw new SandboxSettingError(`${flag} "${text}": expected N% or a size: ${error.message}`);
    }
    throw error;
  }
}

/** The /tmp size of a container whose first call has `budget` bytes. */
export function tmpSize(quota: TmpQuota, budget: number): number {
  const size = 'share' in quota ? Math.floor(budget * quota.share) : quota.bytes;
  return Math.max(MIN_TMP_SIZE, size);
}

/**
 * The default parent cgroup of a worker: its ID and a tag of its state directory, so that two
 * workers with one ID in different clusters (two local clusters on a host) never share one.
 */
export function defaultCgroupParent(workerId: string, stateDirTag: string): string {
  return `readie/${workerId}-${stateDirTag}`;
}

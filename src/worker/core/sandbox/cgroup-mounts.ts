/** Finding the cgroup hierarchies in /proc/self/mountinfo. Pure: the text is passed in. */

/** Where the memory controller lives: a v1 `memory` hierarchy or the v2 unified one. */
export interface MemoryHierarchy {
  readonly version: 1 | 2;
  /** The hierarchy's mount point, e.g. /sys/fs/cgroup/memory (v1) or /sys/fs/cgroup (v2). */
  readonly mountPoint: string;
}

function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) =>
    String.fromCharCode(parseInt(octal, 8)),
  );
}

/**
 * The memory hierarchy named by a mountinfo text: a v1 hierarchy with the memory controller if
 * there is one (hybrid hosts keep the controller there), else the first cgroup2 mount.
 */
export function findMemoryHierarchy(mountinfo: string): MemoryHierarchy | null {
  let unified: MemoryHierarchy | null = null;
  for (const line of mountinfo.split('\n')) {
    const separator = line.indexOf(' - ');
    if (separator < 0) continue;
    const before = line.slice(0, separator).split(' ');
    const after = line.slice(separator + 3).split(' ');
    const mountPoint = before[4];
    const fsType = after[0];
    const superOptions = (after[2] ?? '').split(',');
    if (mountPoint === undefined) continue;
    if (fsType === 'cgroup' && superOptions.includes('memory')) {
      return { version: 1, mountPoint: unescapeMountField(mountPoint) };
    }
    if (fsType === 'cgroup2' && unified === null) {
      unified = { version: 2, mountPoint: unescapeMountField(mountPoint) };
    }
  }
  return unified;
}

/**
 * Where a container's controllers live: on v1 the `memory` and `pids` hierarchies (pids is null
 * when the host mounts none), on v2 the unified one for both.
 */
export type CgroupHierarchies =
  | { readonly version: 1; readonly memory: string; readonly pids: string | null }
  | { readonly version: 2; readonly unified: string };

/**
 * The hierarchies named by a mountinfo text: v1 when a v1 hierarchy has the memory controller
 * (hybrid hosts keep the controllers there), else the first cgroup2 mount; null when neither.
 */
export function findCgroupHierarchies(mountinfo: string): CgroupHierarchies | null {
  const memory = findMemoryHierarchy(mountinfo);
  if (!memory) return null;
  if (memory.version === 2) return { version: 2, unified: memory.mountPoint };
  let pids: string | null = null;
  for (const line of mountinfo.split('\n')) {
    const separator = line.indexOf(' - ');
    if (separator < 0) continue;
    const mountPoint = line.slice(0, separator).split(' ')[4];
    const [fsType, , options] = line.slice(separator + 3).split(' ');
    if (
      mountPoint !== undefined &&
      fsType === 'cgroup' &&
      (options ?? '').split(',').includes('pids')
    ) {
      pids = unescapeMountField(mountPoint);
      break;
    }
  }
  return { version: 1, memory: memory.mountPoint, pids };
}

/** The value of `key` in a flat-keyed cgroup file (memory.events, memory.oom_control). */
export function readCounter(text: string, key: string): number {
  for (const line of text.split('\n')) {
    const [name, value] = line.trim().split(/\s+/);
    if (name === key && value !== undefined) return Number(value);
  }
  return 0;
}

/** Finding the memory cgroup hierarchy in /proc/self/mountinfo. Pure: the text is passed in. */

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

/** The value of `key` in a flat-keyed cgroup file (memory.events, memory.oom_control). */
export function readCounter(text: string, key: string): number {
  for (const line of text.split('\n')) {
    const [name, value] = line.trim().split(/\s+/);
    if (name === key && value !== undefined) return Number(value);
  }
  return 0;
}

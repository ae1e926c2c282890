/** Files of secrets (tokens): the warning when one is open to group or others. */
import { statSync } from 'node:fs';

/**
 * A warning when the secrets file at `path` (named by its flag, `what`) is open to group or
 * others, naming the process (`router`, `worker`) whose user alone should read it; null when it
 * is not, or cannot be looked at (reading it then says why).
 */
export function secretFileExposure(path: string, what: string, reader: string): string | null {
  try {
    const mode = statSync(path).mode & 0o777;
    if ((mode & 0o077) === 0) return null;
    return `${what} ${path} is mode ${mode.toString(8).padStart(4, '0')}: make it 0600 (chmod 600), readable by the ${reader}'s user alone`;
  } catch {
    return null;
  }
}

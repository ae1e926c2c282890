/** Container IDs: short (they appear in socket paths and hostnames) and unique on a worker. */
import { randomBytes } from 'node:crypto';

/** A fresh container ID, `c-` plus 10 hex digits. */
export function newContainerId(): string {
  return `c-${randomBytes(5).toString('hex')}`;
}

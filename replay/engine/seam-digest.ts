/**
 * A digest of a cluster state, to tell whether the replay of a log's part before a seam ended
 * with the state the snapshot the next part starts from holds: its JSON form (as a `Snapshot`
 * event carries it) with its keys in sorted order, without the seq it was taken at, hashed. Pure.
 */
import { createHash } from 'node:crypto';
import stringify from 'safe-stable-stringify';
import { snapshotOf, type ClusterState } from '../../src/projections/index.js';

/**
 * The digest of `state`, whatever seq it is at and whatever order its maps were filled in, but for
 * the calls remembered for their retries: they are forgotten in the order they were remembered,
 * so their order is digested too.
 */
export function stateDigest(state: ClusterState): string {
  const { lastSeq: _seq, ...json } = snapshotOf(state);
  return createHash('sha256')
    .update(stringify(json) ?? '')
    .update(JSON.stringify([...state.routing.calls.keys()]))
    .digest('hex');
}

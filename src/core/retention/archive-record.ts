/**
 * The log's retention as a decision (pure): the router records where it moved a segment of its
 * log (`LogSegmentArchived`) or that it deleted an expired archive file (`LogArchiveExpired`),
 * one event an append, with the `archive` cause. Nothing in the cluster's state depends on it;
 * the events make the log tell where its old segments went.
 */
import type { NewEventOf } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Decision } from '../decision.js';

/** What the archiver did: a segment run archived, or an archive file deleted. */
export type ArchiveRecord = NewEventOf<'LogSegmentArchived'> | NewEventOf<'LogArchiveExpired'>;

/** Records an archive step (`archive`). */
export function decideArchiveRecord(_state: ClusterState, record: ArchiveRecord): Decision {
  return { cause: { kind: 'archive' }, events: [record] };
}

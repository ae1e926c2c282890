/**
 * What `replay explain` shows of a pinned call's routing: how it was resolved (the table entry and
 * its revision, the retried call, or the session), every candidate's rendezvous score and whether
 * it is in the subset, who holds the version, the cold loads in flight, and why the call was
 * placed, cold-loaded or shed. Built only when asked for.
 */
import type { ResidencyState } from '../../../events/schema.js';
import type { Resolution } from './resolution.js';

/** One candidate of the version's flavor, as routing saw it. */
export interface RoutingCandidate {
  readonly workerId: string;
  /** Its rendezvous score for the key, as a decimal integer (an unsigned 64-bit value). */
  readonly score: string;
  /** Its place in the subset (1 = best score), or null when outside it. */
  readonly subsetRank: number | null;
  /** What it last reported of the version; null: nothing. */
  readonly residency: ResidencyState | null;
  /** Whether it holds the version (reports it resident). */
  readonly holds: boolean;
  /** The version of a cold load in flight there, if any. */
  readonly loading: string | null;
  /** Whether an earlier attempt of this call could not reach it (a failed dial): not tried. */
  readonly unreachable: boolean;
  /** For subset members: the first seed filter it fails, with the reason; null when it passes. */
  readonly failedFilter: { readonly filter: string; readonly reason: string } | null;
}

/** A pinned call's routing, explained. */
export interface RoutingExplanation {
  readonly tenantId: string | null;
  /** The resolution, once made. */
  readonly resolution: Resolution | null;
  /** The resolution in words: which entry, which revision, or which call or session it came from. */
  readonly resolved: string | null;
  /** The flavor whose catalogue lists the version. */
  readonly flavor: string | null;
  /** Every candidate of that flavor, best score first. */
  readonly candidates: readonly RoutingCandidate[];
  /** Why the call was placed, cold-loaded or shed (or refused). */
  readonly verdict: string;
}

/** Whoever collects a routing explanation (placement's explanation builder). */
export interface RoutingExplainSink {
  routing(part: RoutingExplanation): void;
}

/** A resolution in words, as explanations print it. */
export function describeResolution(resolution: Resolution): string {
  const entry = `version "${resolution.version}", k ${resolution.k}, revision ${resolution.revision}`;
  switch (resolution.source) {
    case 'table':
      return `tenant ${resolution.tenantId}'s entry in force: ${entry}`;
    case 'retry':
      return `the resolution of the retried call ${resolution.from ?? ''}: ${entry}`;
    case 'session':
      return `the resolution of session ${resolution.from ?? ''} (its first placed call): ${entry}`;
    case 'placed':
      return `the resolution of this call's first placement (placed again after a failed dial): ${entry}`;
  }
}

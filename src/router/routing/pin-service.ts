/**
 * The pin changes and pin status of `AdminService` (shell): an operator credential alone reaches
 * them (the interceptor refuses others, and each handler checks again). A change is decided by the
 * core (`core/pins/pin-changes.ts`), recorded, and answered once it is durable; a refused one
 * appends nothing and answers its own code and message. The residency keeper then tells the
 * workers what to keep and pre-warm.
 */
import type { Metadata, ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import type { PlacementCaches } from '../../core/placement/index.js';
import { decide } from '../../core/decisions.js';
import type { PinChangeDecision } from '../../core/pins/index.js';
import type { AdminServiceServer } from '../../proto/gen/readie/v1/admin.js';
import type { PinChange } from '../../proto/gen/readie/v1/pins.js';
import { toServiceError } from '../grpc-status.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';
import type { RouterCredentials } from '../security/index.js';
import { adminChangeRunner } from '../admin/admin-change.js';
import { pinStatusOf } from './pin-status-view.js';

/** What the pin handlers need. */
export interface PinServiceOptions {
  readonly journal: Journal;
  readonly placement: PlacementCaches;
  readonly credentials: RouterCredentials;
  readonly clock: () => number;
  readonly logger: Logger;
}

/** The pin handlers of `AdminService`. */
export type PinHandlers = Pick<
  AdminServiceServer,
  'pinStatus' | 'stagePin' | 'flipPin' | 'rollbackPin' | 'setPinK' | 'removePin'
>;

function changeOf(decision: PinChangeDecision, notes: readonly string[]): PinChange {
  const { change } = decision;
  return {
    revision: change.revision,
    tenantId: change.tenantId,
    version: change.version ?? '',
    k: change.k ?? 0,
    previousVersion: change.previousVersion ?? '',
    workers: [...change.workers],
    notes: [...change.notes, ...notes],
  };
}

/**
 * The note a pin of a tenant no credential names gets: its calls come from credentials alone, so
 * no call can ask for the pin (a typo in the tenant, or a tokens file without its line).
 */
function tenantNote(credentials: RouterCredentials, tenantId: string): string[] {
  if (credentials.namesTenant(tenantId)) return [];
  if (credentials.mode !== 'tokens') {
    return [
      `with --auth ${credentials.mode} no call has a tenant: pinned calls are refused (tenants come from the tokens file)`,
    ];
  }
  return [
    `no credential names tenant ${tenantId} (no "tenant ${tenantId} TOKEN" line in the router's tokens file): no call can ask for this pin until one does`,
  ];
}

/** The pin handlers, to spread into the `AdminService` implementation. */
export function pinHandlers(options: PinServiceOptions): PinHandlers {
  const { journal, placement, credentials, clock, logger } = options;
  const authorize = (metadata: Metadata, path: string) => credentials.authorize(metadata, path);

  const run = adminChangeRunner({ journal, credentials, logger, subject: 'pin' });
  /** Runs a change decided at the clock's now and answers it, with the tenant note for a stage. */
  function change<Req>(
    what: string,
    call: ServerUnaryCall<Req, { change: PinChange | undefined }>,
    callback: sendUnaryData<{ change: PinChange | undefined }>,
    decide: (request: Req, now: number) => PinChangeDecision,
  ): void {
    run(
      what,
      call,
      callback,
      (request) => decide(request, clock()),
      (decision) => ({
        change: changeOf(
          decision,
          what === 'stage' ? tenantNote(credentials, decision.change.tenantId) : [],
        ),
      }),
    );
  }

  const expected = (revision: number | undefined) => (revision === undefined ? null : revision);
  const subsets = placement.subsets;

  return {
    pinStatus(call, callback) {
      try {
        authorize(call.metadata, call.getPath());
        callback(null, pinStatusOf(journal.state, clock(), call.request.tenantId, subsets));
      } catch (error) {
        callback(toServiceError(error));
      }
    },
    stagePin(call, callback) {
      change('stage', call, callback, (request, now) =>
        decide('stage', journal.state, {
          tenantId: request.tenantId,
          version: request.version,
          k: request.k ?? null,
          force: request.force,
          now,
          subsets,
        }),
      );
    },
    flipPin(call, callback) {
      change('flip', call, callback, (request, now) =>
        decide('flip', journal.state, {
          tenantId: request.tenantId,
          expectRevision: expected(request.expectRevision),
          force: request.force,
          now,
          subsets,
        }),
      );
    },
    rollbackPin(call, callback) {
      change('rollback', call, callback, (request, now) =>
        decide('rollback', journal.state, {
          tenantId: request.tenantId,
          expectRevision: expected(request.expectRevision),
          now,
          subsets,
        }),
      );
    },
    setPinK(call, callback) {
      change('set-k', call, callback, (request, now) =>
        decide('setK', journal.state, {
          tenantId: request.tenantId,
          k: request.k,
          expectRevision: expected(request.expectRevision),
          force: request.force,
          now,
          subsets,
        }),
      );
    },
    removePin(call, callback) {
      change('remove', call, callback, (request, now) =>
        decide('remove', journal.state, {
          tenantId: request.tenantId,
          expectRevision: expected(request.expectRevision),
          now,
          subsets,
        }),
      );
    },
  };
}

/**
 * The quota changes and quota status of `AdminService` (shell; docs/quotas.md): an operator
 * credential alone reaches them (the interceptor refuses others, and each handler checks again).
 * A change is decided by the core (`core/quotas/quota-changes.ts`), recorded, and answered once it
 * is durable; a refused one appends nothing and answers its own code and message. Admission runs
 * after a recorded change (a weight or a cap can let a queued call in).
 */
import type { Metadata, ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import { queuedCount, slotsHeldBy } from '../../core/admission/index.js';
import { decide } from '../../core/decisions.js';
import { QuotaChangeRefusedError, type QuotaChangeDecision } from '../../core/quotas/index.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import { DEFAULT_QUOTA, quotaOf, type Quota } from '../../projections/quota-state.js';
import type { AdminServiceServer } from '../../proto/gen/readie/v1/admin.js';
import type {
  Quota as QuotaMessage,
  QuotaChange,
  QuotaStatusResponse,
} from '../../proto/gen/readie/v1/quotas.js';
import { toServiceError } from '../grpc-status.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';
import type { RouterCredentials } from '../security/index.js';
import { adminChangeRunner } from './admin-change.js';

/** What the quota handlers need. */
export interface QuotaServiceOptions {
  readonly journal: Journal;
  readonly credentials: RouterCredentials;
  readonly logger: Logger;
}

/** The quota handlers of `AdminService`. */
export type QuotaHandlers = Pick<AdminServiceServer, 'quotaStatus' | 'setQuota' | 'removeQuota'>;

/** The most tenants a note names before it says how many more. */
const NAMED_TENANTS = 20;

function quotaMessage(quota: Quota): QuotaMessage {
  return {
    weight: quota.weight,
    maxSlots: quota.maxSlots ?? undefined,
    maxQueued: quota.maxQueued,
  };
}

function changeOf(decision: QuotaChangeDecision, notes: readonly string[]): QuotaChange {
  const { change } = decision;
  return {
    revision: change.revision,
    tenantId: change.tenantId,
    quota: quotaMessage(change.quota),
    previous: quotaMessage(change.previous),
    set: change.set,
    notes: [...notes, ...change.notes],
  };
}

/**
 * The warning a quota of a tenant no credential names gets: its calls come from credentials alone,
 * so a typo in the tenant would cap nobody. It names the tenants the router knows.
 */
export function unknownTenantNote(credentials: RouterCredentials, tenantId: string): string[] {
  if (credentials.namesTenant(tenantId)) return [];
  if (credentials.mode !== 'tokens') {
    return [
      `warning: with --auth ${credentials.mode} no call has a tenant, so no call is of tenant ${tenantId} (tenants come from the tokens file); the quota is kept`,
    ];
  }
  const known = credentials.tenants();
  const named =
    known.length === 0
      ? 'none'
      : known.slice(0, NAMED_TENANTS).join(', ') +
        (known.length > NAMED_TENANTS ? ` and ${known.length - NAMED_TENANTS} more` : '');
  return [
    `warning: no credential names tenant ${tenantId}; the quota is kept, but no call is of this tenant until the tokens file names it (tenants the router knows: ${named})`,
  ];
}

/** The quota table as the status answers it. */
export function quotaStatusOf(state: ClusterState, tenantId: string): QuotaStatusResponse {
  const tenants = tenantId === '' ? [...state.quotas.entries.keys()].sort() : [tenantId];
  return {
    revision: state.quotas.revision,
    quotas: tenants.map((tenant) => ({
      tenantId: tenant,
      quota: quotaMessage(quotaOf(state.quotas, tenant)),
      revision: state.quotas.entries.get(tenant)?.revision ?? 0,
      slotsHeld: slotsHeldBy(state, tenant),
      queued: queuedCount(state, tenant),
    })),
    defaults: quotaMessage(DEFAULT_QUOTA),
  };
}

/** A number of the request, as the core reads it (null: not given). */
const given = (value: number | undefined) => (value === undefined ? null : value);

/** The quota handlers, to spread into the `AdminService` implementation. */
export function quotaHandlers(options: QuotaServiceOptions): QuotaHandlers {
  const { journal, credentials, logger } = options;
  const authorize = (metadata: Metadata, path: string) => credentials.authorize(metadata, path);

  const run = adminChangeRunner({ journal, credentials, logger, subject: 'quota' });
  /** Runs a change and answers it, with the unknown-tenant note for a set. */
  function change<Req>(
    what: string,
    call: ServerUnaryCall<Req, { change: QuotaChange | undefined }>,
    callback: sendUnaryData<{ change: QuotaChange | undefined }>,
    decideChange: (request: Req) => QuotaChangeDecision,
  ): void {
    run(what, call, callback, decideChange, (decision) => ({
      change: changeOf(
        decision,
        what === 'set' ? unknownTenantNote(credentials, decision.change.tenantId) : [],
      ),
    }));
  }

  return {
    quotaStatus(call, callback) {
      try {
        authorize(call.metadata, call.getPath());
        callback(null, quotaStatusOf(journal.state, call.request.tenantId));
      } catch (error) {
        callback(toServiceError(error));
      }
    },
    setQuota(call, callback) {
      change('set', call, callback, (request) => {
        if (request.noMaxSlots && request.maxSlots !== undefined) {
          throw new QuotaChangeRefusedError(
            'INVALID_ARGUMENT',
            'maxSlots: give a cap or lift it (no_max_slots), not both',
          );
        }
        return decide('quotaSet', journal.state, {
          tenantId: request.tenantId,
          weight: given(request.weight),
          maxSlots: request.noMaxSlots ? 'none' : given(request.maxSlots),
          maxQueued: given(request.maxQueued),
          expectRevision: given(request.expectRevision),
        });
      });
    },
    removeQuota(call, callback) {
      change('remove', call, callback, (request) =>
        decide('quotaRemove', journal.state, {
          tenantId: request.tenantId,
          expectRevision: given(request.expectRevision),
        }),
      );
    },
  };
}

/**
 * The call history's RPCs (shell): the operator's `ListCalls`, `GetCall`, `CallLogs` on
 * `AdminService` (any tenant's calls) and the tenant's `OwnCalls`, `OwnCall`, `OwnCallLogs` on
 * `TenantService` (its own only: another tenant's call is answered exactly as an unknown one).
 */
import type { Metadata, sendUnaryData, ServerUnaryCall, ServerWritableStream } from '@grpc/grpc-js';
import type { CallHistory, CallRecord } from '../../projections/call-history.js';
import type {
  CallLogsRequest,
  CallLogsResponse,
  GetCallRequest,
  GetCallResponse,
  ListCallsRequest,
  ListCallsResponse,
} from '../../proto/gen/readie/v1/admin.js';
import type { CallFilter } from '../../proto/gen/readie/v1/history.js';
import type {
  OwnCallLogsRequest,
  OwnCallLogsResponse,
  OwnCallRequest,
  OwnCallResponse,
  OwnCallsRequest,
  OwnCallsResponse,
} from '../../proto/gen/readie/v1/tenant.js';
import { checkId } from '../../core/calls/call-fields.js';
import { toServiceError } from '../grpc-status.js';
import { tenantOf, type Principal, type RouterCredentials } from '../security/index.js';
import type { CallLogsRelay, OutputStream } from './call-logs.js';
import { callView, historyWindowView, queryOf } from './call-view.js';
import { CallNotInHistoryError, HistoryQueryError } from './history-errors.js';

/** What the history's handlers read. */
export interface HistoryHandlerOptions {
  readonly history: CallHistory;
  readonly logs: CallLogsRelay;
  readonly credentials: RouterCredentials;
  readonly clock: () => number;
}

/** Whose calls a caller may see: an operator every tenant's (undefined), a tenant its own. */
type Scope =
  { readonly kind: 'operator' } | { readonly kind: 'tenant'; readonly tenantId: string | null };

function scopeOf(principal: Principal): Scope {
  return principal.kind === 'operator'
    ? { kind: 'operator' }
    : { kind: 'tenant', tenantId: tenantOf(principal) };
}

/** The history, its age bound applied as of now. */
function current(options: HistoryHandlerOptions): CallHistory {
  options.history.forgetDue(new Date(options.clock()).toISOString());
  return options.history;
}

/** The call `requestId` as `scope` may see it; NOT_FOUND (the same words for a foreign one). */
function findCall(options: HistoryHandlerOptions, requestId: string, scope: Scope): CallRecord {
  if (requestId === '') throw new HistoryQueryError('request_id is empty: name the call to show');
  // An ID no call can have (too long, a character IDs never hold) is refused as such, in words
  // that do not repeat it (INVALID_ARGUMENT).
  checkId('request_id', requestId);
  const history = current(options);
  const record = history.get(requestId);
  const visible =
    record !== undefined && (scope.kind === 'operator' || record.tenantId === scope.tenantId);
  if (!visible)
    throw new CallNotInHistoryError(requestId, history.window(), scope.kind === 'tenant');
  return record;
}

function list(
  options: HistoryHandlerOptions,
  filter: CallFilter | undefined,
  tenantId: string | null | undefined,
) {
  const history = current(options);
  return history.list(queryOf(filter, options.clock(), tenantId)).map(callView);
}

/** Streams a call's output to `stream`, ending it with the relay's status. */
function streamLogs(
  options: HistoryHandlerOptions,
  stream: ServerWritableStream<CallLogsRequest, CallLogsResponse> & OutputStream,
  scope: () => Scope,
): void {
  let record: CallRecord;
  try {
    record = findCall(options, stream.request.requestId, scope());
  } catch (error) {
    stream.emit('error', toServiceError(error));
    return;
  }
  options.logs.relay(record, stream.request.follow, stream).then(
    () => stream.end(),
    (error: unknown) => stream.emit('error', toServiceError(error)),
  );
}

/** `AdminService`'s history methods (an operator credential; checked again here). */
export function adminHistoryHandlers(options: HistoryHandlerOptions) {
  const { credentials } = options;
  const operator = (metadata: Metadata, path: string) =>
    scopeOf(credentials.authorize(metadata, path));
  return {
    listCalls(
      call: ServerUnaryCall<ListCallsRequest, ListCallsResponse>,
      callback: sendUnaryData<ListCallsResponse>,
    ) {
      try {
        operator(call.metadata, call.getPath());
        const tenantId = call.request.tenantId === '' ? undefined : call.request.tenantId;
        callback(null, {
          calls: list(options, call.request.filter, tenantId),
          window: historyWindowView(options.history.window()),
        });
      } catch (error) {
        callback(toServiceError(error));
      }
    },
    getCall(
      call: ServerUnaryCall<GetCallRequest, GetCallResponse>,
      callback: sendUnaryData<GetCallResponse>,
    ) {
      try {
        const scope = operator(call.metadata, call.getPath());
        callback(null, { call: callView(findCall(options, call.request.requestId, scope)) });
      } catch (error) {
        callback(toServiceError(error));
      }
    },
    callLogs(stream: ServerWritableStream<CallLogsRequest, CallLogsResponse>) {
      streamLogs(options, stream, () => operator(stream.metadata, stream.getPath()));
    },
  };
}

/** `TenantService`'s history methods (a tenant's credential: its own calls only). */
export function tenantHistoryHandlers(options: HistoryHandlerOptions) {
  const { credentials } = options;
  const tenant = (metadata: Metadata, path: string): Scope => ({
    kind: 'tenant',
    tenantId: tenantOf(credentials.authorize(metadata, path)),
  });
  return {
    ownCalls(
      call: ServerUnaryCall<OwnCallsRequest, OwnCallsResponse>,
      callback: sendUnaryData<OwnCallsResponse>,
    ) {
      try {
        const scope = tenant(call.metadata, call.getPath());
        callback(null, {
          calls: list(
            options,
            call.request.filter,
            scope.kind === 'tenant' ? scope.tenantId : null,
          ),
        });
      } catch (error) {
        callback(toServiceError(error));
      }
    },
    ownCall(
      call: ServerUnaryCall<OwnCallRequest, OwnCallResponse>,
      callback: sendUnaryData<OwnCallResponse>,
    ) {
      try {
        const scope = tenant(call.metadata, call.getPath());
        callback(null, { call: callView(findCall(options, call.request.requestId, scope)) });
      } catch (error) {
        callback(toServiceError(error));
      }
    },
    ownCallLogs(stream: ServerWritableStream<OwnCallLogsRequest, OwnCallLogsResponse>) {
      streamLogs(options, stream, () => tenant(stream.metadata, stream.getPath()));
    },
  };
}

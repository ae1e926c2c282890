/**
 * What one client connection and one tenant may make the router hold on the call path: open call
 * streams (`CONNECTION_MAX_STREAMS`, `TENANT_MAX_STREAMS`) and bytes of half-received messages
 * (`CONNECTION_MAX_BUFFERED`, `TENANT_MAX_BUFFERED`). A stream takes a `StreamBudget` when it
 * opens, reports what it holds as it reads, and gives everything back when it ends. A limit of 0
 * is no limit.
 */
import type { Config } from '../../shared/config.js';
import { formatSize } from '../../shared/units.js';

/** The limits in force (the settings of the same names). */
export type CallStreamLimitSettings = Pick<
  Config,
  | 'CONNECTION_MAX_STREAMS'
  | 'TENANT_MAX_STREAMS'
  | 'CONNECTION_MAX_BUFFERED'
  | 'TENANT_MAX_BUFFERED'
>;

/** What one connection or one tenant holds now. */
interface Usage {
  streams: number;
  buffered: number;
}

/** The connection a stream came on: any object that lives as long as it (its HTTP/2 session). */
export type ConnectionKey = object;

/** Why a stream cannot open or hold more: the message names the limit that refused it. */
export class StreamLimitError extends Error {
  override readonly name = 'StreamLimitError';
  readonly code = 'RESOURCE_EXHAUSTED';
}

/** The open call streams and their buffered bytes, per connection and per tenant. */
export class CallStreamLimits {
  private readonly connections = new WeakMap<ConnectionKey, Usage>();
  private readonly tenants = new Map<string, Usage>();

  constructor(private readonly settings: CallStreamLimitSettings) {}

  /** Call streams open now for `tenantId` (null: callers without a tenant). */
  tenantStreams(tenantId: string | null): number {
    return this.tenants.get(tenantKey(tenantId))?.streams ?? 0;
  }

  /** Call streams open now on `connection`. */
  connectionStreams(connection: ConnectionKey): number {
    return this.connections.get(connection)?.streams ?? 0;
  }

  /** Opens a stream's budget; throws `StreamLimitError` when a stream limit is reached. */
  open(connection: ConnectionKey, tenantId: string | null): StreamBudget {
    const { CONNECTION_MAX_STREAMS, TENANT_MAX_STREAMS } = this.settings;
    const onConnection = this.connections.get(connection) ?? { streams: 0, buffered: 0 };
    const key = tenantKey(tenantId);
    const ofTenant = this.tenants.get(key) ?? { streams: 0, buffered: 0 };
    if (CONNECTION_MAX_STREAMS > 0 && onConnection.streams >= CONNECTION_MAX_STREAMS) {
      throw new StreamLimitError(
        `this connection already has ${onConnection.streams} open calls ` +
          `(CONNECTION_MAX_STREAMS ${CONNECTION_MAX_STREAMS}): wait for one to end, or call over another connection`,
      );
    }
    if (TENANT_MAX_STREAMS > 0 && ofTenant.streams >= TENANT_MAX_STREAMS) {
      throw new StreamLimitError(
        `${tenantId === null ? 'callers without a tenant' : `tenant ${tenantId}`} already ` +
          `${tenantId === null ? 'have' : 'has'} ${ofTenant.streams} open calls ` +
          `(TENANT_MAX_STREAMS ${TENANT_MAX_STREAMS}): wait for some to end`,
      );
    }
    onConnection.streams += 1;
    ofTenant.streams += 1;
    this.connections.set(connection, onConnection);
    this.tenants.set(key, ofTenant);
    return new StreamBudget(this.settings, onConnection, ofTenant, () => {
      if (ofTenant.streams === 0 && this.tenants.get(key) === ofTenant) this.tenants.delete(key);
    });
  }
}

/** One call stream's share of its connection's and its tenant's limits. */
export class StreamBudget {
  private held = 0;
  private closed = false;

  constructor(
    private readonly settings: CallStreamLimitSettings,
    private readonly connection: Usage,
    private readonly tenant: Usage,
    private readonly onClose: () => void,
  ) {}

  /**
   * The stream now holds `bytes` of unfinished messages; throws `StreamLimitError` (and holds
   * nothing more) when that would pass the connection's or the tenant's limit.
   */
  hold(bytes: number): void {
    if (this.closed) return;
    const growth = bytes - this.held;
    if (growth > 0) {
      const { CONNECTION_MAX_BUFFERED, TENANT_MAX_BUFFERED } = this.settings;
      if (
        CONNECTION_MAX_BUFFERED > 0 &&
        this.connection.buffered + growth > CONNECTION_MAX_BUFFERED
      ) {
        throw new StreamLimitError(
          `this connection's calls would hold more than ${formatSize(CONNECTION_MAX_BUFFERED)} of ` +
            `half-received messages (CONNECTION_MAX_BUFFERED): send each message whole, or fewer at once`,
        );
      }
      if (TENANT_MAX_BUFFERED > 0 && this.tenant.buffered + growth > TENANT_MAX_BUFFERED) {
        throw new StreamLimitError(
          `this tenant's calls would hold more than ${formatSize(TENANT_MAX_BUFFERED)} of ` +
            `half-received messages (TENANT_MAX_BUFFERED): send each message whole, or fewer at once`,
        );
      }
    }
    this.connection.buffered += growth;
    this.tenant.buffered += growth;
    this.held = bytes;
  }

  /** The stream is gone: its slot and its bytes are given back (once). */
  close(): void {
    if (this.closed) return;
    this.hold(0);
    this.closed = true;
    this.connection.streams -= 1;
    this.tenant.streams -= 1;
    this.onClose();
  }
}

/** Callers without a tenant share one budget (development modes, `--auth none`). */
function tenantKey(tenantId: string | null): string {
  return tenantId === null ? '\u0000' : `t:${tenantId}`;
}

/**
 * Connections to workers: one grpc-js channel per worker address, shared by the
 * `ExecutionService` client the calls use and the health client the probes use. Channels are
 * made on first use and closed when no live worker has that address any more.
 */
import {
  connectivityState,
  Metadata as GrpcMetadata,
  type ChannelCredentials,
} from '@grpc/grpc-js';
import { HealthClient } from '../../net/health-client.js';
import { ImageServiceClient } from '../../proto/gen/readie/v1/images.js';
import { ResidencyServiceClient } from '../../proto/gen/readie/v1/residency.js';
import { RelayExecutionClient } from '../calls/relay-codec.js';
import { ExecutionServiceClient } from '../../proto/gen/readie/v1/execution.js';

/**
 * Channel options for worker connections: answers may carry 1 MiB chunks plus framing, and a
 * receive window of several chunks keeps a relayed download from stalling on flow control.
 */
const CHANNEL_OPTIONS = {
  'grpc.max_receive_message_length': 8 * 1024 * 1024,
  'grpc-node.flow_control_window': 4 * 1024 * 1024,
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 10_000,
  // A channel that failed to connect waits this long before it tries again (grpc-js's default
  // grows to two minutes): calls and probes meanwhile fail at once, so keep it near a probe round.
  'grpc.initial_reconnect_backoff_ms': 500,
  'grpc.max_reconnect_backoff_ms': 5_000,
};

interface Connection {
  readonly execution: RelayExecutionClient;
  readonly health: HealthClient;
  /** The plain `ExecutionService` client, for its unary methods (a session's end). */
  readonly sessions: ExecutionServiceClient;
  readonly residency: ResidencyServiceClient;
  readonly images: ImageServiceClient;
}

/** The router's cache of worker connections, by address. */
export class WorkerConnections {
  private readonly byAddress = new Map<string, Connection>();

  constructor(private readonly credentials: ChannelCredentials) {}

  /** The `ExecutionService` client for a worker address (speaking the relay codec). */
  execution(address: string): RelayExecutionClient {
    return this.connection(address).execution;
  }

  /**
   * The health client for a worker address (same channel as its execution client), on a channel
   * that is not waiting out a failed connection (see `connection`).
   */
  health(address: string): HealthClient {
    return this.connection(address, { fresh: true }).health;
  }

  /** The plain `ExecutionService` client for a worker address (same channel), for session ends. */
  sessions(address: string): ExecutionServiceClient {
    return this.connection(address, { fresh: true }).sessions;
  }

  /**
   * Connects the channel to `address` (nothing is sent on it): resolves once it is connected,
   * rejects with what went wrong when the connection fails (refused, no route, TLS) or is not up
   * by `deadline` (epoch ms). A channel already connected resolves at once.
   */
  dial(address: string, deadline: number): Promise<void> {
    const connection = this.connection(address, { fresh: true });
    const channel = connection.execution.getChannel();
    return new Promise((resolve, reject) => {
      const failed = () => {
        // The channel does not say why; a call on it does ("connect ECONNREFUSED ...").
        connection.health.check({ service: '' }, new GrpcMetadata(), { deadline }, (error) =>
          reject(
            new Error(
              `could not connect to ${address}${error ? `: ${error.details}` : ' (the connection failed)'}`,
            ),
          ),
        );
      };
      const watch = (): void => {
        const state = channel.getConnectivityState(true);
        if (state === connectivityState.READY) {
          resolve();
          return;
        }
        if (state === connectivityState.TRANSIENT_FAILURE || state === connectivityState.SHUTDOWN) {
          failed();
          return;
        }
        channel.watchConnectivityState(state, deadline, (error?: Error) => {
          if (error) reject(new Error(`could not connect to ${address}: not connected in time`));
          else watch();
        });
      };
      watch();
    });
  }

  /** The `ResidencyService` client for a worker address (same channel as its execution client). */
  residency(address: string): ResidencyServiceClient {
    return this.connection(address).residency;
  }

  /** The `ImageService` client for a worker address (same channel as its execution client). */
  images(address: string): ImageServiceClient {
    return this.connection(address).images;
  }

  /** Closes the channels of every cached address not in `inUse`. */
  retain(inUse: ReadonlySet<string>): void {
    for (const [address, connection] of this.byAddress) {
      if (inUse.has(address)) continue;
      this.byAddress.delete(address);
      // The health client shares the execution client's channel: closing one closes both.
      connection.execution.close();
    }
  }

  /** Closes every channel. */
  closeAll(): void {
    this.retain(new Set());
  }

  /**
   * The connection to `address`, made on first use. With `fresh`, a channel waiting out the
   * backoff of a failed connection (TRANSIENT_FAILURE: it fails every call at once until then) is
   * replaced by a new one that connects now, so a worker back at its address (restarted in place)
   * is reached at once, not after the backoff; no call is in flight on a channel that is not
   * connected.
   */
  private connection(address: string, { fresh = false } = {}): Connection {
    const known = this.byAddress.get(address);
    if (
      fresh &&
      known &&
      known.execution.getChannel().getConnectivityState(false) ===
        connectivityState.TRANSIENT_FAILURE
    ) {
      this.byAddress.delete(address);
      known.execution.close();
    }
    let connection = this.byAddress.get(address);
    if (!connection) {
      const execution = new RelayExecutionClient(address, this.credentials, CHANNEL_OPTIONS);
      const health = new HealthClient(address, this.credentials, {
        channelOverride: execution.getChannel(),
      });
      const sessions = new ExecutionServiceClient(address, this.credentials, {
        channelOverride: execution.getChannel(),
      });
      const residency = new ResidencyServiceClient(address, this.credentials, {
        channelOverride: execution.getChannel(),
      });
      const images = new ImageServiceClient(address, this.credentials, {
        channelOverride: execution.getChannel(),
      });
      connection = { execution, health, sessions, residency, images };
      this.byAddress.set(address, connection);
    }
    return connection;
  }
}

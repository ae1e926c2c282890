/**
 * A bare gRPC relay for the router benchmark: `ProxyService` in, `ExecutionService` out, with the
 * router's codec and backpressure but none of its work (no log, placement, turns, metrics or
 * logs). It measures what one grpc-js hop costs by itself. Args: worker address, listen port.
 */
import {
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  type ServerDuplexStream,
} from '@grpc/grpc-js';
import { RelayExecutionClient, RelayProxyService } from '../../src/router/calls/relay-codec.js';
import type {
  ClientAnswer,
  ClientMessage,
  WorkerAnswer,
} from '../../src/core/calls/relay-messages.js';

const [workerAddress = '', port = '0'] = process.argv.slice(2);
const worker = new RelayExecutionClient(workerAddress, credentials.createInsecure());
const server = new Server();
server.addService(RelayProxyService, {
  requestExecution(call: ServerDuplexStream<ClientMessage, ClientAnswer>) {
    const out = worker.execute(new Metadata());
    call.on('data', (message: ClientMessage) => {
      const ok =
        message.kind === 'config'
          ? out.write({
              kind: 'header',
              header: {
                ids: {
                  requestId: message.config.requestId,
                  sessionId: '',
                  workerId: 'w1',
                  containerId: '',
                  checkpointId: '',
                  version: '',
                  routingRevision: 0,
                },
                memory: 1,
                gpu: false,
                imports: [],
                packages: [],
                pythonVersion: message.config.pythonVersion,
                format: message.config.format,
                version: '',
                coldLoad: false,
                routingRevision: 0,
                tenantId: '',
              },
            })
          : message.kind === 'chunk'
            ? out.write({ kind: 'chunk', wire: message.wire })
            : true;
      if (!ok) {
        call.pause();
        out.once('drain', () => call.resume());
      }
    });
    call.on('end', () => out.end());
    call.on('cancelled', () => out.cancel());
    out.on('data', (answer: WorkerAnswer) => {
      if (!answer.ids) return;
      if (!call.write({ kind: 'relayed', ids: answer.ids, answer })) {
        out.pause();
        call.once('drain', () => out.resume());
      }
    });
    out.on('error', () => undefined);
    out.on('status', (status: { code: number; details: string }) => {
      if (status.code === 0) out.once('end', () => call.end());
      else call.emit('error', status);
    });
  },
});
server.bindAsync(`127.0.0.1:${port}`, ServerCredentials.createInsecure(), (error, bound) => {
  if (error) throw error;
  process.stdout.write(`listening 127.0.0.1:${bound}\n`);
});
process.on('SIGTERM', () => {
  server.forceShutdown();
  process.exit(0);
});

/**
 * A bare relay on the router's own HTTP/2 transport (`src/router/wire/`), for the router
 * benchmark: `ProxyService` in, `ExecutionService` out, the router's frames-as-they-arrived relay
 * and its backpressure, but none of its work (no log, placement, turns, metrics, logs or
 * credentials). What the router costs beyond its transport reads as router / this. Args: worker
 * address, listen port.
 */
import { Metadata, Server } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { ClientAnswer } from '../../src/core/calls/relay-messages.js';
import { trailerEntries } from '../../src/core/calls/answer-trailers.js';
import { codeName } from '../../src/router/grpc-status.js';
import {
  FrontServer,
  grpcJsStreams,
  H2ClientEnd,
  H2WorkerLinks,
  PROXY_PATH,
} from '../../src/router/wire/index.js';
import type { WorkerEnd } from '../../src/router/calls/call-ends.js';
import { DEFAULT_CONFIG } from '../../src/shared/config.js';

const [workerAddress = '', port = '0'] = process.argv.slice(2);
const links = new H2WorkerLinks(undefined, new Metadata(), Date.now);
const server = new Server();
new HealthImplementation({ '': 'SERVING' }).addToServer(server);

const front = await FrontServer.listen(
  '127.0.0.1',
  Number(port),
  { kind: 'insecure' },
  new Map([
    [
      PROXY_PATH,
      (stream) => {
        const client = new H2ClientEnd(stream, Infinity, Date.now());
        let worker: WorkerEnd | undefined;
        client.listen({
          message: (message) => {
            if (message.kind === 'config') {
              const requestId = message.config.requestId;
              const ids = {
                requestId,
                sessionId: '',
                workerId: 'w1',
                containerId: '',
                checkpointId: '',
                version: '',
                routingRevision: 0,
              };
              void links.dial(workerAddress, Date.now() + 2_000).then(() => {
                worker = links.open(
                  workerAddress,
                  Date.now() + 3_600_000,
                  {
                    ids,
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
                  {
                    answer: (answer) => {
                      const relayed: ClientAnswer = {
                        kind: 'relayed',
                        ids: answer.ids ?? ids,
                        answer,
                      };
                      if (!client.write(relayed, () => worker?.resume())) worker?.pause();
                    },
                    ended: (code, details, trailers) => {
                      if (code === 0) client.end([]);
                      else client.fail(codeName(code), details, trailerEntries(trailers));
                    },
                  },
                );
                for (const held of pending) worker.send(held, () => undefined);
                if (ended) worker.halfClose();
                client.resume();
              });
              client.pause();
            } else if (message.kind === 'chunk') {
              const chunk = { kind: 'chunk', wire: message.wire } as const;
              if (!worker) pending.push(chunk);
              else if (!worker.send(chunk, () => client.resume())) client.pause();
            }
          },
          ended: () => {
            ended = true;
            worker?.halfClose();
          },
          gone: () => worker?.cancel(),
        });
        const pending: { kind: 'chunk'; wire: Buffer }[] = [];
        let ended = false;
      },
    ],
  ]),
  grpcJsStreams(server),
  DEFAULT_CONFIG,
);
process.stdout.write(`listening 127.0.0.1:${front.port}\n`);
process.on('SIGTERM', () => {
  front.destroySessions();
  process.exit(0);
});

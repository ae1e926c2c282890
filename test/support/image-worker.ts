/**
 * A worker's ImageService on loopback for tests: real gRPC, real token files, an image store
 * over image directories written to disk as an earlier run would have left them.
 */
import { expect } from 'chai';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { ImageServiceService } from '../../src/proto/gen/readie/v1/images.js';
import type { ImageDeclaration } from '../../src/shared/image-declaration.js';
import { WorkerCredentials } from '../../src/worker/credentials.js';
import { tenantTag } from '../../src/worker/core/images/index.js';
import { imageService } from '../../src/worker/images/image-service.js';
import { ImageStore, type ImageEvent } from '../../src/worker/images/image-store.js';
import type { ImageManifest } from '../../src/worker/images/image-files.js';
import { tempDir } from './temp.js';
import { testLogger } from './worker-harness.js';

/** The router's token, the worker's own, and a tenant's. */
export const ROUTER = 'router-token-for-image-service-0123';
export const OWN = 'worker-token-for-image-service-0123';
export const TENANT = 'tenant-token-for-image-service-0123';

/** Two images of acme whose identities share their first 8 hex digits, and one of globex. */
export const SHARED = 'abcdef12';
export const A1 = `${SHARED}${'1'.repeat(56)}`;
export const A2 = `${SHARED}${'2'.repeat(56)}`;
export const G1 = 'c'.repeat(64);
/** A declaration of acme's that resolved to A1 (its key is in A1's manifest where a test says so). */
export const DECLARED: ImageDeclaration = { packages: ['tomli-w==1.2.0'], imports: [], env: {} };

/** A manifest as a finished build writes it (Python 3.11, flavor cpu, 1 KiB). */
export function manifest(id: string, tenantId: string, declarations: string[] = []): ImageManifest {
  return {
    format: 1,
    id,
    tenantId,
    declarations,
    packages: [],
    imports: [],
    env: {},
    wheels: [],
    bytes: 1024,
    buildMs: 1,
    builtAt: '2026-12-05T12:00:00.000Z',
    python: '3.11',
    flavor: 'cpu',
  };
}

/** A worker's ImageService on loopback, over an image store holding `held` (from disk). */
export interface ImageWorker {
  readonly store: ImageStore;
  readonly imagesDir: string;
  readonly address: string;
  readonly events: ImageEvent[];
  close(): void;
}

/**
 * Starts a worker's ImageService as the router reaches it: real gRPC over loopback, real token
 * files, the image store reading images an earlier run left on disk (no build is needed to list
 * or remove one, so the store's builder and the containers are never reached).
 */
export async function startImageWorker(
  workerId: string,
  held: readonly (readonly [string, ImageManifest])[],
): Promise<ImageWorker> {
  const dir = tempDir('image-service-');
  writeFileSync(join(dir, 'own'), `${OWN}\n`, { mode: 0o600 });
  writeFileSync(join(dir, 'router'), `${ROUTER}\n`, { mode: 0o600 });
  const imagesDir = join(dir, 'images');
  for (const [tenant, image] of held) {
    const imageDir = join(imagesDir, tenantTag(tenant), image.id);
    mkdirSync(join(imageDir, 'prefix'), { recursive: true });
    writeFileSync(join(imageDir, 'manifest.json'), JSON.stringify(image));
  }
  const events: ImageEvent[] = [];
  const store = new ImageStore({
    dir: imagesDir,
    capacity: 0,
    buildTimeoutMs: 1000,
    log: testLogger(),
    clock: () => Date.parse('2026-12-05T12:00:00.000Z'),
    onEvent: (event: ImageEvent) => events.push(event),
    python: '/usr/bin/python3',
    pythonVersion: '3.11.2',
    flavor: 'cpu',
    cacheDir: join(dir, 'pip'),
    memory: 1024 ** 3,
    // A worker that makes no snapshots: listing and removing never reach the containers.
    pool: { imageSnapshots: { makesImageSnapshots: false } },
  } as unknown as ConstructorParameters<typeof ImageStore>[0]);
  await store.load();
  expect(store.list()).to.have.length(held.length);
  const server = new Server();
  server.addService(
    ImageServiceService,
    imageService({
      workerId,
      images: () => store,
      credentials: new WorkerCredentials({
        mode: 'tokens',
        tokenFile: join(dir, 'own'),
        routerTokenFile: join(dir, 'router'),
      }),
      log: testLogger(),
    }),
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return {
    store,
    imagesDir,
    address: `127.0.0.1:${port}`,
    events,
    close: () => server.forceShutdown(),
  };
}

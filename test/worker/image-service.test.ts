import { expect } from 'chai';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  credentials as grpcCredentials,
  Metadata,
  Server,
  ServerCredentials,
  status,
  type ServiceError,
} from '@grpc/grpc-js';
import {
  ImageServiceClient,
  ImageServiceService,
  type ListImagesResponse,
  type RemoveImageResponse,
} from '../../src/proto/gen/readie/v1/images.js';
import { declarationKey, type ImageDeclaration } from '../../src/shared/image-declaration.js';
import { WorkerCredentials } from '../../src/worker/credentials.js';
import { tenantTag } from '../../src/worker/core/images/index.js';
import { imageService } from '../../src/worker/images/image-service.js';
import { ImageStore, type ImageEvent } from '../../src/worker/images/image-store.js';
import type { ImageManifest } from '../../src/worker/images/image-files.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';
import { testLogger } from '../support/worker-harness.js';

const ROUTER = 'router-token-for-image-service-0123';
const OWN = 'worker-token-for-image-service-0123';
const TENANT = 'tenant-token-for-image-service-0123';

/** Two images of acme whose identities share their first 8 hex digits, and one of globex. */
const SHARED = 'abcdef12';
const A1 = `${SHARED}${'1'.repeat(56)}`;
const A2 = `${SHARED}${'2'.repeat(56)}`;
const G1 = 'c'.repeat(64);
const DECLARED: ImageDeclaration = { packages: ['tomli-w==1.2.0'], imports: [], env: {} };

function manifest(id: string, tenantId: string, declarations: string[] = []): ImageManifest {
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

/**
 * A worker's ImageService as the router reaches it: real gRPC over loopback, real token files,
 * the image store reading images an earlier run left on disk (no build is needed to list or
 * remove one, so the store's builder is never reached).
 */
describe("the worker's ImageService: the router's credential alone; removal refusals", function () {
  this.timeout(20_000);
  let server: Server;
  let client: InstanceType<typeof ImageServiceClient>;
  let store: ImageStore;
  let imagesDir: string;
  const events: ImageEvent[] = [];

  before(async () => {
    const dir = tempDir('image-service-');
    writeFileSync(join(dir, 'own'), `${OWN}\n`, { mode: 0o600 });
    writeFileSync(join(dir, 'router'), `${ROUTER}\n`, { mode: 0o600 });
    imagesDir = join(dir, 'images');
    const held: [string, ImageManifest][] = [
      ['acme', manifest(A1, 'acme', [declarationKey('acme', DECLARED)])],
      ['acme', manifest(A2, 'acme')],
      ['globex', manifest(G1, 'globex')],
    ];
    for (const [tenant, image] of held) {
      const imageDir = join(imagesDir, tenantTag(tenant), image.id);
      mkdirSync(join(imageDir, 'prefix'), { recursive: true });
      writeFileSync(join(imageDir, 'manifest.json'), JSON.stringify(image));
    }
    store = new ImageStore({
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
    } as unknown as ConstructorParameters<typeof ImageStore>[0]);
    await store.load();
    expect(store.list()).to.have.length(3);

    server = new Server();
    server.addService(
      ImageServiceService,
      imageService({
        workerId: 'w1',
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
    client = new ImageServiceClient(`127.0.0.1:${port}`, grpcCredentials.createInsecure());
  });

  after(() => {
    client?.close();
    server?.forceShutdown();
    cleanTempDirs();
  });

  function bearer(token: string | null): Metadata {
    const metadata = new Metadata();
    if (token !== null) metadata.set('authorization', `Bearer ${token}`);
    return metadata;
  }

  function list(token: string | null): Promise<ListImagesResponse> {
    return new Promise((resolve, reject) =>
      client.listImages({}, bearer(token), (error, answer) =>
        error ? reject(error) : resolve(answer),
      ),
    );
  }

  function remove(
    token: string | null,
    imageId: string,
    tenantId?: string,
  ): Promise<RemoveImageResponse> {
    return new Promise((resolve, reject) =>
      client.removeImage({ imageId, tenantId }, bearer(token), (error, answer) =>
        error ? reject(error) : resolve(answer),
      ),
    );
  }

  async function refusal(pending: Promise<unknown>): Promise<ServiceError> {
    try {
      await pending;
    } catch (error) {
      return error as ServiceError;
    }
    throw new Error('the request was answered, not refused');
  }

  it("refuses every credential but the router's: none, a tenant's, the worker's own", async () => {
    for (const token of [null, TENANT, OWN]) {
      const listing = await refusal(list(token));
      expect([status.UNAUTHENTICATED, status.PERMISSION_DENIED], String(token)).to.include(
        listing.code,
      );
      const removal = await refusal(remove(token, G1));
      expect([status.UNAUTHENTICATED, status.PERMISSION_DENIED], String(token)).to.include(
        removal.code,
      );
    }
    expect(store.list()).to.have.length(3);
    const answer = await list(ROUTER);
    expect(answer.images.map((image) => image.imageId)).to.deep.equal([A1, A2, G1]);
  });

  it('refuses a prefix naming several images (INVALID_ARGUMENT), removing none; the whole identity removes one', async () => {
    const ambiguous = await refusal(remove(ROUTER, `image:${SHARED}`, 'acme'));
    expect(ambiguous.code).to.equal(status.INVALID_ARGUMENT);
    expect(ambiguous.details).to.match(/names 2 images on this worker/);
    expect(store.held('acme').map((image) => image.manifest.id)).to.deep.equal([A1, A2]);

    const removed = await remove(ROUTER, A2, 'acme');
    expect(removed.removed.map((image) => image.imageId)).to.deep.equal([A2]);
    expect(existsSync(join(imagesDir, tenantTag('acme'), A2))).to.equal(false);
    expect(events).to.deep.include({
      type: 'removed',
      tenantId: 'acme',
      imageId: A2,
      reason: 'removed',
    });
  });

  it("refuses removal while a call uses the image (FAILED_PRECONDITION), and removes it once the call ends; never another tenant's", async () => {
    const use = await store.obtain('acme', DECLARED, new AbortController().signal, () =>
      Promise.resolve(),
    );
    expect(use.built).to.equal(false);
    const busy = await refusal(remove(ROUTER, `image:${SHARED}`, 'acme'));
    expect(busy.code).to.equal(status.FAILED_PRECONDITION);
    expect(busy.details).to.match(/in use by 1 call/);
    expect(store.held('acme')).to.have.length(1);

    // The router asking for globex's A1 finds none: one tenant's image is never another's.
    const crossed = await refusal(remove(ROUTER, A1, 'globex'));
    expect(crossed.code).to.equal(status.NOT_FOUND);

    use.release();
    const removed = await remove(ROUTER, `image:${SHARED}`, 'acme');
    expect(removed.removed.map((image) => [image.tenantId, image.imageId])).to.deep.equal([
      ['acme', A1],
    ]);
    expect(store.list().map((image) => image.manifest.id)).to.deep.equal([G1]);
  });
});

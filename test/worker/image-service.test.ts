import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { credentials as grpcCredentials, Metadata, status, type ServiceError } from '@grpc/grpc-js';
import {
  ImageServiceClient,
  type ListImagesResponse,
  type RemoveImageResponse,
} from '../../src/proto/gen/readie/v1/images.js';
import { declarationKey } from '../../src/shared/image-declaration.js';
import { tenantTag } from '../../src/worker/core/images/index.js';
import type { ImageEvent, ImageStore } from '../../src/worker/images/image-store.js';
import {
  A1,
  A2,
  DECLARED,
  G1,
  manifest,
  OWN,
  ROUTER,
  SHARED,
  startImageWorker,
  TENANT,
  type ImageWorker,
} from '../support/image-worker.js';
import { cleanTempDirs } from '../support/temp.js';

describe("the worker's ImageService: the router's credential alone; removal refusals", function () {
  this.timeout(20_000);
  let worker: ImageWorker;
  let store: ImageStore;
  let imagesDir: string;
  let events: ImageEvent[];
  let client: InstanceType<typeof ImageServiceClient>;

  before(async () => {
    worker = await startImageWorker('w1', [
      ['acme', manifest(A1, 'acme', [declarationKey('acme', DECLARED)])],
      ['acme', manifest(A2, 'acme')],
      ['globex', manifest(G1, 'globex')],
    ]);
    ({ store, imagesDir, events } = worker);
    client = new ImageServiceClient(worker.address, grpcCredentials.createInsecure());
  });

  after(() => {
    client?.close();
    worker?.close();
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

import { expect } from 'chai';
import { credentials as grpcCredentials, Metadata } from '@grpc/grpc-js';
import type { ClusterState } from '../../src/projections/cluster-state.js';
import { ImageServiceClient } from '../../src/proto/gen/readie/v1/images.js';
import {
  ImageRemovalRefusedError,
  ImageRequestError,
} from '../../src/router/images/image-errors.js';
import {
  checkedImageName,
  checkedTenant,
  checkedWorkerId,
} from '../../src/router/images/image-requests.js';
import { removeWorkerImage, type ImageFanoutDeps } from '../../src/router/images/image-fanout.js';
import {
  A1,
  A2,
  G1,
  manifest,
  ROUTER,
  SHARED,
  startImageWorker,
  type ImageWorker,
} from '../support/image-worker.js';
import { cleanTempDirs } from '../support/temp.js';

describe("the router's image removal across workers (image-fanout)", function () {
  this.timeout(20_000);
  let workers: ImageWorker[];
  let deps: ImageFanoutDeps;

  before(async () => {
    // Each worker holds one image of acme under the prefix: neither is ambiguous on its own.
    workers = [
      await startImageWorker('w1', [['acme', manifest(A1, 'acme')]]),
      await startImageWorker('w2', [
        ['acme', manifest(A2, 'acme')],
        ['globex', manifest(G1, 'globex')],
      ]),
    ];
    const clients = new Map(
      workers.map((worker) => [
        worker.address,
        new ImageServiceClient(worker.address, grpcCredentials.createInsecure()),
      ]),
    );
    const metadata = new Metadata();
    metadata.set('authorization', `Bearer ${ROUTER}`);
    const state = {
      workers: new Map(
        workers.map((worker, index) => [
          `w${index + 1}`,
          { workerId: `w${index + 1}`, status: 'ready', address: worker.address },
        ]),
      ),
    } as unknown as ClusterState;
    deps = {
      state: () => state,
      connections: { images: (address: string) => clients.get(address)! },
      workerMetadata: metadata,
      clock: () => Date.now(),
    };
  });

  after(() => {
    for (const worker of workers ?? []) worker.close();
    cleanTempDirs();
  });

  it('refuses a prefix that names one image on each of two workers (INVALID_ARGUMENT, naming both), removing neither', async () => {
    let refused: unknown = null;
    await removeWorkerImage(deps, {
      imageId: `image:${SHARED}`,
      tenantId: undefined,
      workerId: '',
    }).catch((error: unknown) => (refused = error));
    expect(refused).to.be.instanceOf(ImageRemovalRefusedError);
    const error = refused as ImageRemovalRefusedError;
    expect(error.code).to.equal('INVALID_ARGUMENT');
    expect(error.message).to.include(`image:${A1.slice(0, 16)}`);
    expect(error.message).to.include(`image:${A2.slice(0, 16)}`);
    expect(workers.map((worker) => worker.store.list().length)).to.deep.equal([1, 2]);

    // Named on one worker, the prefix is one image there; globex's image is untouched.
    const outcome = await removeWorkerImage(deps, {
      imageId: `image:${SHARED}`,
      tenantId: 'acme',
      workerId: 'w2',
    });
    expect(outcome.removed.map((image) => [image.workerId, image.imageId])).to.deep.equal([
      ['w2', A2],
    ]);
    expect(workers[1]!.store.list().map((image) => image.manifest.id)).to.deep.equal([G1]);
  });
});

describe('image requests: what a listing or removal may name (pure)', () => {
  it('takes "" (calls without a tenant) and a plain tenant; refuses a long one or one with control characters, as pins and quotas do', () => {
    expect(checkedTenant(undefined)).to.equal(undefined);
    expect(checkedTenant('')).to.equal('');
    expect(checkedTenant('acme')).to.equal('acme');
    expect(() => checkedTenant('a'.repeat(257))).to.throw(
      ImageRequestError,
      'a tenant ID has at most 256 characters',
    );
    expect(() => checkedTenant('acme\nglobex')).to.throw(
      ImageRequestError,
      'a tenant ID may not hold control characters',
    );
  });

  it('takes an identity or image: and 8 or more hex digits (read as lower case); refuses anything else', () => {
    expect(checkedImageName(` IMAGE:${SHARED.toUpperCase()} `)).to.equal(`image:${SHARED}`);
    expect(checkedImageName(A1)).to.equal(A1);
    for (const bad of ['image:abcdef1', 'image:abcdefgh', `${A1}0`, 'image:']) {
      expect(() => checkedImageName(bad), bad).to.throw(ImageRequestError, /64 hex digits/);
    }
    expect(checkedWorkerId('')).to.equal('');
    expect(() => checkedWorkerId('w\u001b[2J')).to.throw(ImageRequestError);
  });
});

import { expect } from 'chai';
import { ReportHeldImagesRequest } from '../../../src/proto/gen/readie/v1/registry.js';
import {
  declarationKey,
  firstErrorLine,
  heldImagesList,
  imageIdentity,
  imageName,
  planImageRoom,
  tenantTag,
} from '../../../src/worker/core/images/index.js';

const MiB = 1024 * 1024;
const WHEELS = [{ file: 'tomli_w-1.2.0-py3-none-any.whl', sha256: 'a'.repeat(64) }];
const DECLARED = { packages: ['tomli-w'], imports: ['tomli_w'], env: { B: '2', A: '1' } };

describe("the worker core: images' names and their cache", () => {
  it('given the same wheels, imports, environment, Python and flavor, then the identity is the same, whatever the order of the variables', () => {
    const id = imageIdentity(WHEELS, DECLARED, '3.11.2', 'cpu');
    expect(id).to.match(/^[0-9a-f]{64}$/);
    expect(
      imageIdentity(WHEELS, { ...DECLARED, env: { A: '1', B: '2' } }, '3.11.9', 'cpu'),
    ).to.equal(id);
    expect(imageName(id)).to.equal(`image:${id.slice(0, 16)}`);
  });

  it('given another wheel hash, Python minor, flavor, import or variable, then the identity differs', () => {
    const id = imageIdentity(WHEELS, DECLARED, '3.11.2', 'cpu');
    const others = [
      imageIdentity([{ ...WHEELS[0]!, sha256: 'b'.repeat(64) }], DECLARED, '3.11.2', 'cpu'),
      imageIdentity(WHEELS, DECLARED, '3.12.0', 'cpu'),
      imageIdentity(WHEELS, DECLARED, '3.11.2', 'gpu'),
      imageIdentity(WHEELS, { ...DECLARED, imports: [] }, '3.11.2', 'cpu'),
      imageIdentity(WHEELS, { ...DECLARED, env: { A: '1' } }, '3.11.2', 'cpu'),
    ];
    for (const other of others) expect(other).to.not.equal(id);
  });

  it("given two tenants, then their declarations' keys and directories never meet, and no tag holds the tenant's text", () => {
    expect(declarationKey('acme', DECLARED)).to.not.equal(declarationKey('globex', DECLARED));
    expect(tenantTag('acme')).to.not.equal(tenantTag('globex'));
    expect(tenantTag('../../etc')).to.match(/^[0-9a-f]{32}$/);
  });

  it("given an installer's output, then the first ERROR line names what went wrong, else its last line", () => {
    expect(
      firstErrorLine([
        'Looking in indexes: ...',
        'ERROR: Could not find a version that satisfies the requirement nope (from versions: none)',
        'ERROR: No matching distribution found for nope',
      ]),
    ).to.equal(
      'ERROR: Could not find a version that satisfies the requirement nope (from versions: none)',
    );
    expect(firstErrorLine(['a', 'b', ''])).to.equal('b');
    expect(firstErrorLine([])).to.equal(null);
  });

  it('given a full cache, when an image arrives, then the least recently used idle images go, never one in use', () => {
    const images = [
      { key: 'old-busy', bytes: 4 * MiB, lastUsedMs: 1, inUse: 1 },
      { key: 'old', bytes: 3 * MiB, lastUsedMs: 2, inUse: 0 },
      { key: 'new', bytes: 3 * MiB, lastUsedMs: 9, inUse: 0 },
    ];
    expect(planImageRoom(images, 2 * MiB, 10 * MiB)).to.deep.equal({ fits: true, evict: ['old'] });
    expect(planImageRoom(images, 5 * MiB, 10 * MiB)).to.deep.equal({
      fits: true,
      evict: ['old', 'new'],
    });
    const crowded = planImageRoom(images, 7 * MiB, 10 * MiB);
    expect(crowded.fits).to.equal(false);
    expect(!crowded.fits && crowded.reason).to.include('images in use hold 4.0 MiB');
    expect(planImageRoom(images, 100 * MiB, 0)).to.deep.equal({ fits: true, evict: [] });
  });

  it('given an image larger than the whole cache, then it is refused naming both sizes', () => {
    const plan = planImageRoom([], 12 * MiB, 10 * MiB);
    expect(plan).to.deep.equal({
      fits: false,
      reason:
        "the image is 12.0 MiB, larger than this worker's image cache of 10.0 MiB (--image-cache-size)",
    });
  });

  it('given more images than a report carries, when the held images are listed, then the most recently used that fit, and the list says it is not complete', () => {
    const image = (i: number, keys = 1) => ({
      tenantId: 't',
      imageId: i.toString(16).padStart(64, '0'),
      bytes: 1,
      declarations: Array.from({ length: keys }, () => 'c'.repeat(64)),
      lastUsedMs: i,
    });
    const few = heldImagesList([image(1), image(2)]);
    expect(few.complete).to.equal(true);
    expect(few.images.map((entry) => entry.lastUsedMs)).to.deep.equal([2, 1]);
    const many = heldImagesList(Array.from({ length: 4100 }, (_, i) => image(i)));
    expect(many.complete).to.equal(false);
    expect(many.images).to.have.length(4096);
    expect(many.images.at(-1)?.lastUsedMs).to.equal(4);
    // Declaration keys are bounded per image (256) and per report (16384).
    const keyed = heldImagesList(Array.from({ length: 70 }, (_, i) => image(i, 300)));
    expect(keyed.complete).to.equal(false);
    expect(keyed.images).to.have.length(64);
    expect(keyed.images.every((entry) => entry.declarations.length === 256)).to.equal(true);
    // Tenant IDs of many-byte characters: the report stays under the router's 4 MiB a message.
    const wide = heldImagesList(
      Array.from({ length: 4096 }, (_, i) => ({ ...image(i), tenantId: '漢'.repeat(256) })),
    );
    expect(wide.complete).to.equal(false);
    const encoded = ReportHeldImagesRequest.encode({
      workerId: 'w1',
      complete: false,
      images: wide.images.map(({ tenantId, imageId, bytes, declarations }) => ({
        tenantId,
        imageId,
        bytes,
        declarations: [...declarations],
      })),
    }).finish();
    expect(encoded.length).to.be.below(3 * 1024 * 1024);
    expect(wide.images.length).to.be.above(3000);
  });
});

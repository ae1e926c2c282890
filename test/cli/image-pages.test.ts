import { expect } from 'chai';
import { renderImageCaches, renderImages } from '../../src/cli/image-command.js';
import type { ImagesResponse } from '../../src/proto/gen/readie/v1/admin.js';
import { HOSTILE, UNPRINTABLE } from '../support/hostile-text.js';

const NOW = Date.parse('2026-12-05T12:00:00.000Z');
const ID = 'ab'.repeat(32);

function image(tenantId: string, workerId = 'w1') {
  return {
    workerId,
    tenantId,
    imageId: ID,
    name: `image:${ID.slice(0, 16)}`,
    bytes: 27 * 1024,
    lastUsedAt: '2026-12-05T11:59:30.000Z',
    inUse: 1,
  };
}

describe('readie images: the page an operator reads', () => {
  it('given images of two tenants and two workers, then one row each and each cache against its size', () => {
    const answer: ImagesResponse = {
      images: [image(''), image('acme', 'w2')],
      workers: [
        { workerId: 'w1', count: 1, bytes: 27 * 1024, capacity: 10 * 1024 ** 3, error: '' },
        { workerId: 'w2', count: 3, bytes: 5 * 1024 ** 2, capacity: 0, error: '' },
        { workerId: 'w3', count: 0, bytes: 0, capacity: 0, error: 'no answer in 5 s' },
      ],
    };
    expect(renderImages(answer, NOW).split('\n')).to.deep.equal([
      '┌────────────────────────┬────────┬────────┬───────┬──────────┬────────┐',
      '│ IMAGE                  │ TENANT │ WORKER │ SIZE  │ LAST USE │ IN USE │',
      '├────────────────────────┼────────┼────────┼───────┼──────────┼────────┤',
      '│ image:abababababababab │ (none) │ w1     │ 27KiB │ 30s ago  │ 1      │',
      '├────────────────────────┼────────┼────────┼───────┼──────────┼────────┤',
      '│ image:abababababababab │ "acme" │ w2     │ 27KiB │ 30s ago  │ 1      │',
      '└────────────────────────┴────────┴────────┴───────┴──────────┴────────┘',
      '',
      'image caches:',
      '  w1  1 image, 27KiB of 10GiB',
      '  w2  3 images, 5MiB of no bound',
      '  w3  did not answer: no answer in 5 s',
      '',
    ]);
  });

  it('given no images and no workers, then it says so', () => {
    expect(renderImages({ images: [], workers: [] }, NOW)).to.equal(
      'no images on the workers that are up\n\nimage caches: no worker is up\n',
    );
  });

  for (const [what, hostile, shown] of HOSTILE) {
    it(`escapes a tenant's and a worker's text: ${what}`, () => {
      const page = renderImages(
        {
          images: [image(hostile, hostile)],
          workers: [{ workerId: hostile, count: 1, bytes: 1, capacity: 0, error: hostile }],
        },
        NOW,
      );
      expect(page.replaceAll('\n', ''), what).to.not.match(UNPRINTABLE);
      expect(page).to.include(`"${shown}"`);
      expect(
        renderImageCaches({
          workers: [{ workerId: hostile, count: 0, bytes: 0, capacity: 0, error: '' }],
        }).join('\n'),
      ).to.include(shown);
    });
  }
});

/**
 * `readie images` and `readie image rm`: tenants' images through the router's AdminService
 * (docs/images.md), with an operator credential. The router asks every worker that is up; a worker
 * that does not answer is named. Every tenant string is escaped before it is printed.
 */
import type { Command } from 'commander';
import type {
  AdminServiceRemoveImageResponse,
  ImagesResponse,
} from '../proto/gen/readie/v1/admin.js';
import { printableData } from '../shared/printable.js';
import { age, roughSize } from './status/readable-units.js';
import { table } from './text-table.js';
import { adminAction, runAdmin, withConnection, type AdminCommandFlags } from './admin-command.js';

/** A tenant (already made printable) as a person reads it: quoted; calls without one: `(none)`. */
function tenantText(tenantId: string): string {
  return tenantId === '' ? '(none)' : `"${tenantId}"`;
}

/** The images and the workers' caches as text (`now`: epoch ms, for the ages). */
export function renderImages(answer: ImagesResponse, now: number): string {
  const shown = printableData(answer);
  const lines: string[] = [];
  if (shown.images.length === 0) {
    lines.push('no images on the workers that are up');
  } else {
    lines.push(
      table(
        ['IMAGE', 'TENANT', 'WORKER', 'SIZE', 'LAST USE', 'IN USE'],
        shown.images.map((image) => [
          image.name,
          tenantText(image.tenantId),
          image.workerId,
          roughSize(image.bytes),
          `${age(image.lastUsedAt, now)} ago`,
          String(image.inUse),
        ]),
      ),
    );
  }
  lines.push('', ...renderImageCaches(answer));
  return `${lines.join('\n')}\n`;
}

/** Each worker's image cache, one line each: `w1  3 images, 1.2GiB of 10GiB`. */
export function renderImageCaches(answer: Pick<ImagesResponse, 'workers'>): string[] {
  const shown = printableData(answer);
  if (shown.workers.length === 0) return ['image caches: no worker is up'];
  const width = Math.max(...shown.workers.map((worker) => worker.workerId.length));
  return [
    'image caches:',
    ...shown.workers.map((worker) => `  ${worker.workerId.padEnd(width)}  ${cacheText(worker)}`),
  ];
}

/** One worker's cache (already printable): `3 images, 1.2GiB of 10GiB`, or why it is unknown. */
function cacheText(worker: ImagesResponse['workers'][number]): string {
  if (worker.error !== '') return `did not answer: ${worker.error}`;
  const bound = worker.capacity === 0 ? 'no bound' : roughSize(worker.capacity);
  return `${worker.count} image${worker.count === 1 ? '' : 's'}, ${roughSize(worker.bytes)} of ${bound}`;
}

function printRemoved(answer: AdminServiceRemoveImageResponse): void {
  const shown = printableData(answer);
  for (const image of shown.removed) {
    process.stdout.write(
      `removed ${image.name} of tenant ${tenantText(image.tenantId)} from ${image.workerId} (${roughSize(image.bytes)})\n`,
    );
  }
  for (const refusal of shown.refusals) process.stdout.write(`not removed: ${refusal}\n`);
}

/** Adds `readie images` and `readie image rm` to `program`. */
export function addImageCommands(program: Command): void {
  withConnection(
    program
      .command('images')
      .description(
        "tenants' images on the workers that are up (an operator token): where each is built, its size, its last use, the calls using it; and each worker's image cache",
      )
      .option('--tenant <id>', 'only this tenant\'s images ("" : calls without a tenant)')
      .addHelpText(
        'after',
        '\nAn image is named as calls name it (checkpoint_id): image: and the first 16 hex digits of its\n' +
          'identity. The router asks each worker that is up (ready or leaving); one that does not answer in\n' +
          '5 s is named under "image caches". Exit status: 0 done, 1 refused by the router, 2 bad options.\n' +
          'See docs/images.md.',
      ),
  ).action(
    adminAction('readie images', (options: AdminCommandFlags & { tenant?: string }) =>
      runAdmin('readie images', options, async (send) => {
        const answer = await send<ImagesResponse>((client, metadata, callOptions, cb) =>
          client.images({ tenantId: options.tenant }, metadata, callOptions, cb),
        );
        process.stdout.write(
          options.json === true ? `${JSON.stringify(answer)}\n` : renderImages(answer, Date.now()),
        );
      }),
    ),
  );

  const image = program
    .command('image')
    .description("manage tenants' images on the workers (an operator token)");
  withConnection(
    image
      .command('rm')
      .description(
        'remove an image from the workers that hold it (each records ImageRemoved); the next call that needs it builds it again',
      )
      .argument('<image>', 'the image: image: and at least 8 hex digits of its identity, or all 64')
      .option(
        '--tenant <id>',
        'only this tenant\'s image ("" : calls without a tenant); default: any tenant\'s',
      )
      .option('--worker <id>', 'only from this worker; default: every worker that is up')
      .addHelpText(
        'after',
        '\nRefused (nothing removed) while a call uses the image (FAILED_PRECONDITION), when no worker\n' +
          'that is up holds it (NOT_FOUND), or when a prefix names several images (INVALID_ARGUMENT).\n' +
          'Exit status: 0 removed, 1 refused by the router, 2 bad options. See docs/images.md.',
      ),
  ).action(
    adminAction(
      'readie image rm',
      (name: string, options: AdminCommandFlags & { tenant?: string; worker?: string }) =>
        runAdmin('readie image rm', options, async (send) => {
          const answer = await send<AdminServiceRemoveImageResponse>(
            (client, metadata, callOptions, cb) =>
              client.removeImage(
                { imageId: name, tenantId: options.tenant, workerId: options.worker ?? '' },
                metadata,
                callOptions,
                cb,
              ),
          );
          if (options.json === true) process.stdout.write(`${JSON.stringify(answer)}\n`);
          else printRemoved(answer);
        }),
    ),
  );
}

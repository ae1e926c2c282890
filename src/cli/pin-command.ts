/**
 * `readie pin`: tenant-pinned versions through the router's AdminService (docs/tenant-routing.md),
 * with an operator credential: stage, status, flip, rollback, set-k, remove. Each prints what it
 * did (or `--json`); a refusal prints its code and the router's message and exits 1.
 */
import { Option, type Command } from 'commander';
import type { PinChange, PinStatusResponse } from '../proto/gen/readie/v1/pins.js';
import { printableData } from '../shared/printable.js';
import {
  adminAction,
  AdminUsageError,
  revisionOf,
  runAdmin,
  withConnection,
  type AdminCommandFlags as ConnectFlags,
  type Send,
} from './admin-command.js';
import { renderPins } from './status/pin-sections.js';

function positive(text: string, flag: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1) {
    throw new AdminUsageError(`${flag} ${text}: expected a whole number >= 1`);
  }
  return Number(text);
}

function printChange(what: string, answer: PinChange | undefined, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(answer ?? null)}\n`);
    return;
  }
  if (!answer) return;
  const change = printableData(answer);
  const version = change.version === '' ? '(none)' : change.version;
  const workers = (count: number) => `${count} worker${count === 1 ? '' : 's'}`;
  // k says how many workers should keep the version; the list, how many do (fewer when the
  // fleet has fewer that can hold it).
  const kept =
    change.k === 0
      ? ''
      : change.workers.length === change.k
        ? ` on ${workers(change.k)}`
        : ` with k ${change.k}, on ${workers(change.workers.length)}`;
  const lines = [
    `${what}: tenant ${change.tenantId} -> ${version}${kept} (routing revision ${change.revision})`,
  ];
  if (change.previousVersion !== '') lines.push(`  previous version: ${change.previousVersion}`);
  if (change.workers.length > 0) lines.push(`  workers: ${change.workers.join(', ')}`);
  for (const note of change.notes) lines.push(`  note: ${note}`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** Runs one `readie pin` command; the exit status. */
const run = (flags: ConnectFlags, act: (send: Send) => Promise<void>) =>
  runAdmin('readie pin', flags, act);

const action = <A extends unknown[]>(handler: (...args: A) => Promise<number>) =>
  adminAction('readie pin', handler);

/** Adds `readie pin` and its subcommands to `program`. */
export function addPinCommand(program: Command): void {
  const pin = program
    .command('pin')
    .description(
      "tenant-pinned versions through the router's admin service (an operator token): stage, flip, roll back, change k, remove, status",
    )
    .addHelpText(
      'after',
      '\nEvery change is logged (PinStaged, RoutingRevised) and refused, with nothing appended, when it is\n' +
        'invalid (an alias such as latest, k < 1), names what does not exist (a version not in the catalogue,\n' +
        'a tenant without a pin), contradicts the state (a stale --expect-revision, a flip before the staged\n' +
        'version is resident on its whole subset) or does not fit the resident memory (unless --force).\n' +
        'Exit status: 0 done, 1 refused by the router (the message says why), 2 bad options. See docs/tenant-routing.md.',
    );

  withConnection(
    pin
      .command('stage')
      .description(
        "stage a tenant's next version: PinStaged, and the subset it hashes to pre-warms it",
      )
      .requiredOption('--tenant <id>', 'the tenant')
      .requiredOption('--version <checkpoint>', 'an exact catalogue checkpoint ID (never an alias)')
      .option('--k <n>', "workers that keep it (default: the tenant's current k, or 1)")
      .option('--force', 'stage even when the table would not fit the fleet'),
  ).action(
    action(
      (options: ConnectFlags & { tenant: string; version: string; k?: string; force?: boolean }) =>
        run(options, async (send) => {
          const k = options.k === undefined ? undefined : positive(options.k, '--k');
          const answer = await send<{ change?: PinChange }>((client, metadata, callOptions, cb) =>
            client.stagePin(
              {
                tenantId: options.tenant,
                version: options.version,
                k,
                force: options.force === true,
              },
              metadata,
              callOptions,
              cb,
            ),
          );
          printChange('staged', answer.change, options.json === true);
        }),
    ),
  );

  withConnection(
    pin
      .command('status')
      .description(
        'the table and its revision, staged pins and their pre-warm progress, drain, residency and the fleet budget',
      )
      .option('--tenant <id>', 'only this tenant'),
  ).action(
    action((options: ConnectFlags & { tenant?: string }) =>
      run(options, async (send) => {
        const status = await send<PinStatusResponse>((client, metadata, callOptions, cb) =>
          client.pinStatus({ tenantId: options.tenant ?? '' }, metadata, callOptions, cb),
        );
        if (options.json === true) process.stdout.write(`${JSON.stringify(status)}\n`);
        else process.stdout.write(renderPins(status));
      }),
    ),
  );

  withConnection(
    pin
      .command('flip')
      .description(
        'put the staged version in force (refused until it is resident on its whole subset)',
      )
      .requiredOption('--tenant <id>', 'the tenant')
      .option('--expect-revision <n>', 'refuse unless this is the routing revision in force')
      .option(
        '--force',
        'flip even when the staged version is not resident everywhere (calls then cold-load)',
      ),
  ).action(
    action((options: ConnectFlags & { tenant: string; expectRevision?: string; force?: boolean }) =>
      run(options, async (send) => {
        const answer = await send<{ change?: PinChange }>((client, metadata, callOptions, cb) =>
          client.flipPin(
            {
              tenantId: options.tenant,
              expectRevision: revisionOf(options.expectRevision),
              force: options.force === true,
            },
            metadata,
            callOptions,
            cb,
          ),
        );
        printChange('flipped', answer.change, options.json === true);
      }),
    ),
  );

  withConnection(
    pin
      .command('rollback')
      .description('back to the version the current one replaced (kept resident by PIN_RETENTION)')
      .requiredOption('--tenant <id>', 'the tenant')
      .option('--expect-revision <n>', 'refuse unless this is the routing revision in force'),
  ).action(
    action((options: ConnectFlags & { tenant: string; expectRevision?: string }) =>
      run(options, async (send) => {
        const answer = await send<{ change?: PinChange }>((client, metadata, callOptions, cb) =>
          client.rollbackPin(
            { tenantId: options.tenant, expectRevision: revisionOf(options.expectRevision) },
            metadata,
            callOptions,
            cb,
          ),
        );
        printChange('rolled back', answer.change, options.json === true);
      }),
    ),
  );

  withConnection(
    pin
      .command('set-k')
      .description(
        "change how many workers keep the tenant's version (raising it adds the next workers by score)",
      )
      .requiredOption('--tenant <id>', 'the tenant')
      .addOption(new Option('--k <n>', 'workers that keep it, at least 1').makeOptionMandatory())
      .option('--expect-revision <n>', 'refuse unless this is the routing revision in force')
      .option('--force', 'change even when the table would not fit the fleet'),
  ).action(
    action(
      (
        options: ConnectFlags & {
          tenant: string;
          k: string;
          expectRevision?: string;
          force?: boolean;
        },
      ) =>
        run(options, async (send) => {
          const k = positive(options.k, '--k');
          const answer = await send<{ change?: PinChange }>((client, metadata, callOptions, cb) =>
            client.setPinK(
              {
                tenantId: options.tenant,
                k,
                expectRevision: revisionOf(options.expectRevision),
                force: options.force === true,
              },
              metadata,
              callOptions,
              cb,
            ),
          );
          printChange('k set', answer.change, options.json === true);
        }),
    ),
  );

  withConnection(
    pin
      .command('remove')
      .description(
        "remove the tenant's pin (and a staged one): its pinned calls are refused until pinned again",
      )
      .requiredOption('--tenant <id>', 'the tenant')
      .option('--expect-revision <n>', 'refuse unless this is the routing revision in force'),
  ).action(
    action((options: ConnectFlags & { tenant: string; expectRevision?: string }) =>
      run(options, async (send) => {
        const answer = await send<{ change?: PinChange }>((client, metadata, callOptions, cb) =>
          client.removePin(
            { tenantId: options.tenant, expectRevision: revisionOf(options.expectRevision) },
            metadata,
            callOptions,
            cb,
          ),
        );
        printChange('removed', answer.change, options.json === true);
      }),
    ),
  );
}

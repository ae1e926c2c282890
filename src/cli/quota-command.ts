/**
 * `readie quota`: tenants' quotas through the router's AdminService (docs/quotas.md), with an
 * operator credential: set, status, remove. Each prints what it did and the quota table's revision
 * (or `--json`); a refusal prints its code and the router's message and exits 1.
 */
import type { Command } from 'commander';
import type { Quota, QuotaChange, QuotaStatusResponse } from '../proto/gen/readie/v1/quotas.js';
import { printableData } from '../shared/printable.js';
import { parseNumber } from '../shared/units.js';
import {
  adminAction,
  AdminUsageError,
  revisionOf,
  runAdmin,
  withConnection,
  type AdminCommandFlags,
  type Send,
} from './admin-command.js';

const NAME = 'readie quota';

/** A number as typed (the router says whether it is a valid weight or cap). */
function numberOf(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  try {
    return parseNumber(text);
  } catch {
    throw new AdminUsageError(`${flag} ${text}: expected a number`);
  }
}

function quotaText(quota: Quota | undefined): string {
  if (quota === undefined) return '(none)';
  const slots = quota.maxSlots === undefined ? 'no cap' : String(quota.maxSlots);
  return `weight ${quota.weight}, maxSlots ${slots}, maxQueued ${quota.maxQueued}`;
}

function printChange(what: string, answer: QuotaChange | undefined, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(answer ?? null)}\n`);
    return;
  }
  if (!answer) return;
  const change = printableData(answer);
  const lines = [
    `${what}: tenant ${change.tenantId} -> ${quotaText(change.quota)}${change.set ? '' : ' (the defaults)'} (quota revision ${change.revision})`,
    `  previous: ${quotaText(change.previous)}`,
  ];
  for (const note of change.notes) lines.push(`  note: ${note}`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** The quota table as text. */
export function renderQuotas(answer: QuotaStatusResponse): string {
  const status = printableData(answer);
  const lines = [
    `quota table: revision ${status.revision}; a tenant it does not name gets ${quotaText(status.defaults)}`,
  ];
  if (status.quotas.length === 0) lines.push('  no tenant has a quota');
  for (const tenant of status.quotas) {
    const source = tenant.revision === 0 ? 'defaults' : `revision ${tenant.revision}`;
    lines.push(
      `  ${tenant.tenantId}: ${quotaText(tenant.quota)} (${source}); holds ${tenant.slotsHeld} slot${tenant.slotsHeld === 1 ? '' : 's'}, ${tenant.queued} queued`,
    );
  }
  return `${lines.join('\n')}\n`;
}

const run = (flags: AdminCommandFlags, act: (send: Send) => Promise<void>) =>
  runAdmin(NAME, flags, act);
const action = <A extends unknown[]>(handler: (...args: A) => Promise<number>) =>
  adminAction(NAME, handler);

interface SetFlags extends AdminCommandFlags {
  readonly tenant: string;
  readonly weight?: string;
  readonly maxSlots?: string;
  readonly maxQueued?: string;
  readonly expectRevision?: string;
}

/** Adds `readie quota` and its subcommands to `program`. */
export function addQuotaCommand(program: Command): void {
  const quota = program
    .command('quota')
    .description(
      "tenants' quotas through the router's admin service (an operator token): weight in the fair order, slot cap, queue cap",
    )
    .addHelpText(
      'after',
      '\nWhen calls wait for room, the next one admitted is the head of the tenant with the lowest\n' +
        'slots held / weight (ties by tenant ID); a tenant may use idle room beyond its share. maxSlots\n' +
        "caps the slots a tenant holds (calls in flight plus its sessions' idle containers): a call beyond\n" +
        'it waits even when the cluster has room. maxQueued caps its waiting calls: beyond it a call is\n' +
        'refused at once (RESOURCE_EXHAUSTED, with a retry-after). Defaults: weight 1, no slot cap, 2000\n' +
        "queued. Every change is logged (QuotaChanged, QuotaRemoved) with the table's next revision, and\n" +
        'refused, with nothing appended, when a value is not valid (the message names the field) or\n' +
        '--expect-revision is stale. A quota for a tenant no credential names is kept, with a warning.\n' +
        'Exit status: 0 done, 1 refused by the router (the message says why), 2 bad options. See docs/quotas.md.',
    );

  withConnection(
    quota
      .command('set')
      .description(
        "set fields of a tenant's quota (QuotaChanged); the fields not given keep their value",
      )
      .requiredOption('--tenant <id>', 'the tenant')
      .option('--weight <n>', 'its weight in the fair order, a number above 0 (default 1)')
      .option(
        '--max-slots <n|none>',
        "the most slots it may hold, sessions' idle containers included, a whole number >= 1; none: no cap (the default)",
      )
      .option(
        '--max-queued <n>',
        'the most calls it may have waiting, a whole number >= 1 (default 2000)',
      )
      .option('--expect-revision <n>', 'refuse unless this is the quota revision in force'),
  ).action(
    action((options: SetFlags) =>
      run(options, async (send) => {
        const none = options.maxSlots?.trim().toLowerCase() === 'none';
        const request = {
          tenantId: options.tenant,
          weight: numberOf(options.weight, '--weight'),
          maxSlots: none ? undefined : numberOf(options.maxSlots, '--max-slots'),
          noMaxSlots: none,
          maxQueued: numberOf(options.maxQueued, '--max-queued'),
          expectRevision: revisionOf(options.expectRevision),
        };
        const answer = await send<{ change?: QuotaChange }>((client, metadata, callOptions, cb) =>
          client.setQuota(request, metadata, callOptions, cb),
        );
        printChange('set', answer.change, options.json === true);
      }),
    ),
  );

  withConnection(
    quota
      .command('status')
      .description(
        'the quota table and its revision: each tenant its quota, the slots it holds and the calls it has queued now',
      )
      .option('--tenant <id>', 'only this tenant (its defaults when the table does not name it)'),
  ).action(
    action((options: AdminCommandFlags & { tenant?: string }) =>
      run(options, async (send) => {
        const status = await send<QuotaStatusResponse>((client, metadata, callOptions, cb) =>
          client.quotaStatus({ tenantId: options.tenant ?? '' }, metadata, callOptions, cb),
        );
        if (options.json === true) process.stdout.write(`${JSON.stringify(status)}\n`);
        else process.stdout.write(renderQuotas(status));
      }),
    ),
  );

  withConnection(
    quota
      .command('remove')
      .description("remove a tenant's quota (QuotaRemoved): it gets the defaults")
      .requiredOption('--tenant <id>', 'the tenant')
      .option('--expect-revision <n>', 'refuse unless this is the quota revision in force'),
  ).action(
    action((options: AdminCommandFlags & { tenant: string; expectRevision?: string }) =>
      run(options, async (send) => {
        const answer = await send<{ change?: QuotaChange }>((client, metadata, callOptions, cb) =>
          client.removeQuota(
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

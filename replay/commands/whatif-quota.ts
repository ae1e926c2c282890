/**
 * `replay whatif <log> --quota ... | --quota-file FILE`: decide admission again under another
 * quota table, against the recorded state, and list the decisions that would change and which
 * calls would wait longer, wait less or be refused (engine/quota-whatif.ts).
 */
import type { QuotaTable } from '../../src/projections/index.js';
import { QUOTA_CHANGE_KINDS, QuotaWhatif, type QuotaChangeKind } from '../engine/quota-whatif.js';
import { cell, table } from '../format/table.js';
import { openLogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';
import { out, type SourceOptions } from './options.js';

/** The table in words, as the summary names it. */
function tableText(quotas: QuotaTable): string {
  if (quotas.entries.size === 0) return 'no quotas (every tenant on the defaults)';
  return [...quotas.entries]
    .map(([tenant, quota]) => {
      const slots = quota.maxSlots === null ? 'no cap' : String(quota.maxSlots);
      return `${tenant} weight ${quota.weight} maxSlots ${slots} maxQueued ${quota.maxQueued}`;
    })
    .join('; ');
}

/** Each request once, in the order first named. */
function unique(ids: Iterable<string>): string[] {
  return [...new Set(ids)];
}

/** Runs `replay whatif` under a quota table; resolves to the exit status. */
export async function whatifQuotaCommand(
  logPaths: string | readonly string[],
  quotas: QuotaTable,
  options: SourceOptions & { readonly json?: boolean },
): Promise<number> {
  const source = await openLogSource(logPaths, options);
  const whatif = new QuotaWhatif({ quotas });
  try {
    await forEachEvent(source, (event) => whatif.push(event), 0, true);
  } finally {
    await source.close();
  }
  const { changes, calls } = whatif.end();
  const counts = Object.fromEntries(QUOTA_CHANGE_KINDS.map((kind) => [kind, 0])) as Record<
    QuotaChangeKind,
    number
  >;
  for (const change of changes) counts[change.change] += 1;
  const waitsLonger = unique(changes.flatMap((c) => c.waitsLonger));
  const waitsLess = unique(changes.flatMap((c) => c.waitsLess));
  const refused = unique(changes.flatMap((c) => c.refused));
  if (options.json) {
    for (const change of changes) out(JSON.stringify(change));
    out(
      JSON.stringify({
        summary: {
          calls,
          changed: changes.length,
          ...counts,
          waitsLonger,
          waitsLess,
          refused,
          quotas: Object.fromEntries(
            [...quotas.entries].map(([tenant, { weight, maxSlots, maxQueued }]) => [
              tenant,
              { weight, maxSlots, maxQueued },
            ]),
          ),
        },
      }),
    );
    return 0;
  }
  if (changes.length > 0) {
    const rows = changes.map((c) => {
      const earlier =
        c.change === 'admitted-earlier'
          ? c.recordedAdmission === null
            ? ' (never admitted in the log)'
            : ` (admitted at seq ${c.recordedAdmission} in the log)`
          : '';
      return [String(c.seq), c.requestId, c.change, c.before, `${c.after}${earlier}`];
    });
    out(table(['SEQ', 'REQUEST', 'CHANGE', 'RECORDED TABLE', 'GIVEN TABLE'], rows));
  }
  const kinds = QUOTA_CHANGE_KINDS.map((kind) => `${kind} ${counts[kind]}`).join(', ');
  out(
    `${calls} call${calls === 1 ? '' : 's'} and their admissions decided again under ${cell(tableText(quotas))} ` +
      `(the log's quota changes replaced from the start): ${changes.length} decision${changes.length === 1 ? '' : 's'} would change (${kinds})`,
  );
  out(`waits longer: ${cell(waitsLonger)}`);
  out(`waits less: ${cell(waitsLess)}`);
  out(`refused: ${cell(refused)}`);
  return 0;
}

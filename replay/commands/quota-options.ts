/**
 * The quota table `replay whatif` decides under (docs/quotas.md): `--quota
 * tenant=ID,weight=N,max-slots=N|none,max-queued=N` (repeatable) and `--quota-file FILE` (what
 * `readie quota status --json` prints); `--quota none` alone: an empty table, every tenant on the
 * defaults. Fields a tenant's entry does not name take the defaults: the table replaces the
 * recorded one from the start, so there is nothing to keep.
 */
import { readFileSync } from 'node:fs';
import { capProblem, weightProblem } from '../../src/core/quotas/index.js';
import { tenantIdProblem } from '../../src/core/tenant-id.js';
import { parseNumber } from '../../src/shared/units.js';
import {
  DEFAULT_QUOTA,
  type Quota,
  type QuotaEntry,
  type QuotaTable,
} from '../../src/projections/index.js';
import { ReplayInputError } from '../io/replay-input-error.js';

/** The fields of one `--quota`, by their flag-style names. */
const QUOTA_FIELDS = ['tenant', 'weight', 'max-slots', 'max-queued'] as const;
const STATUS_FIELDS = ['revision', 'quotas', 'defaults'];
const TENANT_FIELDS = ['tenantId', 'quota', 'revision', 'slotsHeld', 'queued'];
const FILE_QUOTA_FIELDS = ['weight', 'maxSlots', 'maxQueued'];

/** A number as typed, or an error naming `where`. */
function numberOf(text: string, where: string): number {
  try {
    return parseNumber(text);
  } catch {
    throw new ReplayInputError(`${where}: expected a number, got ${JSON.stringify(text)}`);
  }
}

/** A quota's values checked by the router's own rules; throws naming `where`. */
function checked(quota: Quota, where: string): Quota {
  const problem =
    weightProblem(quota.weight) ??
    (quota.maxSlots === null ? null : capProblem('maxSlots', quota.maxSlots)) ??
    capProblem('maxQueued', quota.maxQueued);
  if (problem !== null) throw new ReplayInputError(`${where}: ${problem}`);
  return quota;
}

function checkTenant(tenantId: string, where: string): void {
  const problem = tenantId === '' ? 'names no tenant' : tenantIdProblem(tenantId, 'quota');
  if (problem !== null) throw new ReplayInputError(`${where}: ${problem}`);
}

/** One `--quota tenant=ID,weight=N,max-slots=N|none,max-queued=N`. */
function parseQuotaFlag(text: string): [string, Quota] {
  const where = `--quota ${text}`;
  let tenant: string | undefined;
  let quota: Quota = DEFAULT_QUOTA;
  const seen = new Set<string>();
  for (const part of text.split(',')) {
    const equals = part.indexOf('=');
    if (equals < 0) {
      throw new ReplayInputError(
        `${where}: expected FIELD=VALUE, got ${JSON.stringify(part)} (fields: ${QUOTA_FIELDS.join(', ')})`,
      );
    }
    const field = part.slice(0, equals).trim();
    const value = part.slice(equals + 1).trim();
    if (!(QUOTA_FIELDS as readonly string[]).includes(field)) {
      throw new ReplayInputError(
        `${where}: unknown field ${JSON.stringify(field)} (fields: ${QUOTA_FIELDS.join(', ')})`,
      );
    }
    if (seen.has(field)) throw new ReplayInputError(`${where}: ${field} given twice`);
    seen.add(field);
    if (field === 'tenant') tenant = value;
    else if (field === 'weight') quota = { ...quota, weight: numberOf(value, `${where}: weight`) };
    else if (field === 'max-slots') {
      quota = {
        ...quota,
        maxSlots: value.toLowerCase() === 'none' ? null : numberOf(value, `${where}: max-slots`),
      };
    } else quota = { ...quota, maxQueued: numberOf(value, `${where}: max-queued`) };
  }
  checkTenant(tenant ?? '', where);
  return [tenant ?? '', checked(quota, where)];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function onlyFields(value: Record<string, unknown>, known: readonly string[], where: string): void {
  for (const field of Object.keys(value)) {
    if (!known.includes(field)) {
      throw new ReplayInputError(
        `${where}: unknown field ${JSON.stringify(field)} (fields: ${known.join(', ')})`,
      );
    }
  }
}

/** A value of the file that must be a number (absent: `fallback`). */
function fileNumber(value: unknown, fallback: number | null, where: string): number | null {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number') {
    throw new ReplayInputError(`${where}: expected a number, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** A quota of the file (`maxSlots` absent or null: no cap). */
function fileQuota(value: unknown, where: string): Quota {
  if (!isObject(value)) throw new ReplayInputError(`${where}: expected an object`);
  onlyFields(value, FILE_QUOTA_FIELDS, where);
  const quota: Quota = {
    weight: fileNumber(value.weight, DEFAULT_QUOTA.weight, `${where}.weight`) as number,
    maxSlots: fileNumber(value.maxSlots, null, `${where}.maxSlots`),
    maxQueued: fileNumber(value.maxQueued, DEFAULT_QUOTA.maxQueued, `${where}.maxQueued`) as number,
  };
  return checked(quota, where);
}

/** `--quota-file FILE`: the table in the shape `readie quota status --json` prints. */
function parseQuotaFile(file: string): Array<[string, Quota]> {
  const where = `--quota-file ${file}`;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ReplayInputError(`${where}: ${(error as Error).message}`);
  }
  let status: unknown;
  try {
    status = JSON.parse(text);
  } catch (error) {
    throw new ReplayInputError(`${where}: not JSON: ${(error as Error).message}`);
  }
  if (!isObject(status)) throw new ReplayInputError(`${where}: expected an object`);
  onlyFields(status, STATUS_FIELDS, where);
  if (status.defaults !== undefined) {
    const defaults = fileQuota(status.defaults, `${where}: defaults`);
    if (
      defaults.weight !== DEFAULT_QUOTA.weight ||
      defaults.maxSlots !== DEFAULT_QUOTA.maxSlots ||
      defaults.maxQueued !== DEFAULT_QUOTA.maxQueued
    ) {
      throw new ReplayInputError(
        `${where}: defaults: the defaults are not a setting (weight ${DEFAULT_QUOTA.weight}, no slot cap, maxQueued ${DEFAULT_QUOTA.maxQueued}): name each tenant in quotas instead`,
      );
    }
  }
  const quotas = status.quotas ?? [];
  if (!Array.isArray(quotas)) throw new ReplayInputError(`${where}: quotas: expected a list`);
  return quotas.map((entry: unknown, i): [string, Quota] => {
    const at = `${where}: quotas[${i}]`;
    if (!isObject(entry)) throw new ReplayInputError(`${at}: expected an object`);
    onlyFields(entry, TENANT_FIELDS, at);
    const tenantId = typeof entry.tenantId === 'string' ? entry.tenantId : '';
    checkTenant(tenantId, `${at}.tenantId`);
    return [tenantId, fileQuota(entry.quota ?? {}, `${at}.quota`)];
  });
}

/**
 * The table `--quota` and `--quota-file` give (null when neither was given): the file's entries,
 * then each `--quota`, a tenant named twice refused.
 */
export function parseQuotaTable(
  flags: readonly string[] = [],
  file: string | undefined = undefined,
): QuotaTable | null {
  if (flags.length === 0 && file === undefined) return null;
  const entries = new Map<string, QuotaEntry>();
  if (flags.includes('none')) {
    if (flags.length > 1 || file !== undefined) {
      throw new ReplayInputError(
        '--quota none is the empty table (every tenant on the defaults): give it alone',
      );
    }
    return { revision: 0, entries };
  }
  const given = [...(file === undefined ? [] : parseQuotaFile(file)), ...flags.map(parseQuotaFlag)];
  for (const [tenantId, quota] of given) {
    if (entries.has(tenantId)) {
      throw new ReplayInputError(`--quota: tenant ${tenantId} is given twice`);
    }
    entries.set(tenantId, { ...quota, revision: 0 });
  }
  return { revision: 0, entries };
}

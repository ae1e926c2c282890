/**
 * The settings (docs/router.md): names (the environment variable names), kinds, defaults and the
 * words `--help` and the docs use. Values are held in canonical units: bytes and milliseconds.
 */
import { formatDuration, parseCount, parseDuration, parseSize, UnitParseError } from './units.js';

/** How a setting's text is read. */
export type SettingKind = 'ratio' | 'size' | 'duration' | 'count';

/** One numeric setting: its kind, default (canonical units) and one line for `--help`. */
export interface SettingSpec {
  readonly kind: SettingKind;
  readonly default: number;
  readonly help: string;
  /**
   * The value a recorded config (a `RouterStarted` written before the setting existed) means by
   * leaving it out, when that is not the default: a log recorded before the queue existed
   * replays with no queue.
   */
  readonly unrecorded?: number;
}

/** Every numeric setting, keyed by its environment variable name. */
export const SETTINGS = {
  MEMORY_HEADROOM: {
    kind: 'ratio',
    default: 0.9,
    help: 'fraction of a worker memory that in-use plus reserved memory may reach',
  },
  GPU_MEMORY_HEADROOM: {
    kind: 'ratio',
    default: 0.9,
    help: 'fraction of a worker GPU memory that in-use GPU memory plus a call budget may reach',
  },
  DEFAULT_MEMORY: {
    kind: 'size',
    default: 1024 ** 3,
    help: 'memory budget of a call that names none',
  },
  WORKER_MAX_EXECUTORS: {
    kind: 'count',
    default: 8,
    help: 'containers a worker holds at most (reported by the worker)',
  },
  SESSION_WAIT_TIMEOUT: {
    kind: 'duration',
    default: 60_000,
    help: 'how long a session call waits for its turn before RESOURCE_EXHAUSTED',
  },
  EXECUTION_TIMEOUT: { kind: 'duration', default: 3_600_000, help: 'deadline of one call' },
  WORKER_UTILIZATION_INTERVAL: {
    kind: 'duration',
    default: 10_000,
    help: 'how often a worker reports its load',
  },
  PROBE_INTERVAL: {
    kind: 'duration',
    default: 5_000,
    help: 'how often the router health-checks a worker',
  },
  PROBE_TIMEOUT: {
    kind: 'duration',
    default: 2_000,
    help: 'deadline of one health check, and of connecting to a worker for a call',
  },
  PROBE_FAILURE_THRESHOLD: {
    kind: 'count',
    default: 3,
    help: 'consecutive failed health checks that evict a worker',
  },
  LEADER_LEASE: {
    kind: 'duration',
    default: 5_000,
    help: 'a JetStream log: how long the leader lease lasts unrenewed before a standby takes over',
  },
  REAPER_INTERVAL: { kind: 'duration', default: 5_000, help: 'how often the reaper runs' },
  WORKER_TTL: {
    kind: 'duration',
    default: 30_000,
    help: 'a worker not heard from for this long is evicted',
  },
  EXECUTOR_TTL: {
    kind: 'duration',
    default: 600_000,
    help: 'the worker destroys a session container idle for this long',
  },
  EXECUTOR_ERROR_TTL: {
    kind: 'duration',
    default: 60_000,
    help: 'a container in error is forgotten after this long',
  },
  DIAL_TOTAL_TIMEOUT: {
    kind: 'duration',
    default: 60_000,
    help: 'how long a worker retries connecting to a starting executor',
  },
  ROUTING_RETRY_AFTER: {
    kind: 'duration',
    default: 2_000,
    help: 'the retry-after hint of a pinned call shed while its worker loads a version',
  },
  PIN_RETENTION: {
    kind: 'duration',
    default: 3_600_000,
    help: 'a version stays protected from eviction this long after it stops being pinned',
  },
  QUEUE_TIMEOUT: {
    kind: 'duration',
    default: 600_000,
    unrecorded: 0,
    help: 'how long a call that finds no room now waits in the admission queue before RESOURCE_EXHAUSTED; 0: refused at once, with no queue',
  },
  SESSION_RETENTION: {
    kind: 'duration',
    default: 3_600_000,
    help: 'an ended or expired session is remembered this long (its calls refused NOT_FOUND), then forgotten',
  },
  FIRST_MESSAGE_TIMEOUT: {
    kind: 'duration',
    default: 10_000,
    help: "a call stream whose first message (the call's config) has not fully arrived this long after it opened is ended with DEADLINE_EXCEEDED",
  },
  STREAM_IDLE_TIMEOUT: {
    kind: 'duration',
    default: 60_000,
    help: 'a call stream whose client sends nothing for this long before ending its request is ended with DEADLINE_EXCEEDED (not counted while the router holds the call back)',
  },
  CONNECTION_IDLE_TIMEOUT: {
    kind: 'duration',
    default: 300_000,
    help: 'a client connection with no open stream for this long is closed (GOAWAY); also bounds a TLS handshake',
  },
  CONNECTION_MAX_STREAMS: {
    kind: 'count',
    default: 256,
    help: 'call streams one client connection may hold open; more are refused with RESOURCE_EXHAUSTED',
  },
  TENANT_MAX_STREAMS: {
    kind: 'count',
    default: 1024,
    help: 'call streams one tenant may hold open over all its connections; more are refused with RESOURCE_EXHAUSTED',
  },
  CONNECTION_MAX_BUFFERED: {
    kind: 'size',
    default: 256 * 1024 ** 2,
    help: "bytes of half-received messages the router holds for one connection's calls; the call stream that would pass it is ended with RESOURCE_EXHAUSTED",
  },
  TENANT_MAX_BUFFERED: {
    kind: 'size',
    default: 1024 ** 3,
    help: "bytes of half-received messages the router holds for one tenant's calls over all its connections; the call stream that would pass it is ended with RESOURCE_EXHAUSTED",
  },
  OUTPUT_MAX_CALL_BYTES: {
    kind: 'size',
    default: 8 * 1024 ** 2,
    help: "bytes of one call's output (stdout, stderr, readie's notes) a worker keeps for readie logs; later lines are not kept",
  },
  OUTPUT_MAX_TOTAL_BYTES: {
    kind: 'size',
    default: 1024 ** 3,
    help: "bytes of calls' output a worker keeps on disk in all; the oldest ended call's output is dropped first",
  },
  OUTPUT_MAX_CALLS: {
    kind: 'count',
    default: 100_000,
    help: "calls whose output a worker keeps on disk (one file each); the oldest ended call's output is dropped first",
  },
  OUTPUT_RETENTION: {
    kind: 'duration',
    default: 86_400_000,
    help: "how long a worker keeps a call's output after the call ended",
  },
  HISTORY_MAX_CALLS: {
    kind: 'count',
    default: 10_000,
    help: 'calls the router remembers in its call history (readie calls, readie call, the dashboard); the oldest is forgotten first',
  },
  HISTORY_RETENTION: {
    kind: 'duration',
    default: 86_400_000,
    help: 'how long the call history keeps a call after its request',
  },
  LOG_RETENTION: {
    kind: 'duration',
    default: 7 * 86_400_000,
    help: 'segments of the event log older than this move to the archive (0: none for their age); at least SNAPSHOT_INTERVAL and EXECUTION_TIMEOUT',
  },
  LOG_MAX_BYTES: {
    kind: 'size',
    default: 0,
    help: 'while the live event log holds more than this, its oldest segments move to the archive (0: no bound)',
  },
  ARCHIVE_RETENTION: {
    kind: 'duration',
    default: 90 * 86_400_000,
    help: 'archive files whose newest event is older than this are deleted (0: kept forever); at least LOG_RETENTION',
  },
  SNAPSHOT_INTERVAL: {
    kind: 'duration',
    default: 3_600_000,
    help: 'the log appends a Snapshot at least this often (besides every --snapshot-every events), closing a segment retention can archive (0: by count alone)',
  },
} as const satisfies Record<string, SettingSpec>;

/** The name of a numeric setting (its environment variable). */
export type SettingName = keyof typeof SETTINGS;

/** A complete configuration: every numeric setting in canonical units. */
export type Config = { readonly [K in SettingName]: number };

/** Every setting name, in the order `--help` lists them. */
export const SETTING_NAMES = Object.keys(SETTINGS) as SettingName[];

/** The defaults of every setting. */
export const DEFAULT_CONFIG: Config = Object.fromEntries(
  SETTING_NAMES.map((name) => [name, SETTINGS[name].default]),
) as Config;

/** A setting that does not exist or whose value does not parse; names the setting. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** True when `name` is a numeric setting's name. */
export function isSettingName(name: string): name is SettingName {
  return Object.hasOwn(SETTINGS, name);
}

/** Parses one setting's text (`30s`, `1GiB`, `0.8`, `3`) into canonical units. */
export function parseSetting(name: string, text: string): number {
  if (!isSettingName(name)) {
    throw new ConfigError(`unknown setting ${name} (known: ${SETTING_NAMES.join(', ')})`);
  }
  const spec: SettingSpec = SETTINGS[name];
  try {
    switch (spec.kind) {
      case 'duration':
        return parseDuration(text);
      case 'size':
        return parseSize(text);
      case 'ratio': {
        const value = Number(text);
        if (text.trim() === '' || !Number.isFinite(value) || value <= 0 || value > 1) {
          throw new UnitParseError(`"${text}" is not a ratio in (0, 1]`);
        }
        return value;
      }
      case 'count':
        return parseCount(text);
    }
  } catch (error) {
    if (error instanceof UnitParseError) throw new ConfigError(`${name}: ${error.message}`);
    throw error;
  }
}

/**
 * Reads every setting present in `env` (an environment map passed in, so this stays pure) over
 * the defaults, then applies `overrides` (already parsed, e.g. from flags).
 */
export function resolveConfig(
  env: Readonly<Record<string, string | undefined>>,
  overrides: Partial<Config> = {},
): Config {
  const config: Record<string, number> = { ...DEFAULT_CONFIG };
  for (const name of SETTING_NAMES) {
    const text = env[name];
    if (text !== undefined && text !== '') config[name] = parseSetting(name, text);
  }
  return { ...(config as Config), ...overrides };
}

/**
 * Why the retention settings cannot work together, naming the settings and both bounds, or
 * undefined when they can: a log retention shorter than the snapshot spacing would archive the
 * segment a start needs, one shorter than a call's lifetime the start of a call still running;
 * an archive retention shorter than the log's would delete files as soon as they are written.
 */
export function retentionProblem(config: Config): string | undefined {
  const retention = config.LOG_RETENTION;
  if (retention > 0) {
    const spacing = config.SNAPSHOT_INTERVAL;
    const lifetime = config.EXECUTION_TIMEOUT;
    if (spacing === 0 || retention < spacing || retention < lifetime) {
      const spacingText = spacing === 0 ? '0 (by count alone)' : formatDuration(spacing);
      return (
        `LOG_RETENTION ${formatDuration(retention)} is shorter than what the live log must keep: ` +
        `the snapshot spacing (SNAPSHOT_INTERVAL ${spacingText}) and the longest call's lifetime ` +
        `(EXECUTION_TIMEOUT ${formatDuration(lifetime)}); give LOG_RETENTION at least ` +
        `${formatDuration(Math.max(spacing, lifetime))}${spacing === 0 ? ' and SNAPSHOT_INTERVAL more than 0' : ''}, or 0 to archive nothing for its age`
      );
    }
  }
  const archive = config.ARCHIVE_RETENTION;
  if (archive > 0 && archive < retention) {
    return (
      `ARCHIVE_RETENTION ${formatDuration(archive)} is shorter than LOG_RETENTION ` +
      `${formatDuration(retention)}: archive files would be deleted as soon as they are written; ` +
      `give ARCHIVE_RETENTION at least ${formatDuration(retention)}, or 0 to keep them all`
    );
  }
  return undefined;
}

/** Throws a `ConfigError` when the retention settings cannot work together (`retentionProblem`). */
export function checkRetention(config: Config): Config {
  const problem = retentionProblem(config);
  if (problem !== undefined) throw new ConfigError(problem);
  return config;
}

/**
 * The configuration in force for a recorded config object (as in a `RouterStarted` event):
 * recorded values over the defaults (a setting's `unrecorded` value where it says what leaving
 * it out meant), ignoring names this version does not know.
 */
export function configInForce(recorded: Readonly<Record<string, unknown>> | null): Config {
  if (!recorded) return DEFAULT_CONFIG;
  const config: Record<string, number> = { ...DEFAULT_CONFIG };
  for (const name of SETTING_NAMES) {
    const value = recorded[name];
    const spec: SettingSpec = SETTINGS[name];
    if (typeof value === 'number' && Number.isFinite(value)) config[name] = value;
    else if (spec.unrecorded !== undefined) config[name] = spec.unrecorded;
  }
  return config as Config;
}

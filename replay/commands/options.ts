/** Options shared by the replay commands. */
import { ConfigError, parseSetting, type Config } from '../../src/shared/config.js';
import { ReplayInputError } from '../io/replay-input-error.js';

/** Parses `--set NAME=VALUE` options into config overrides (canonical units). */
export function parseOverrides(settings: readonly string[] = []): Partial<Config> {
  const overrides: Record<string, number> = {};
  for (const setting of settings) {
    const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(setting);
    if (!match)
      throw new ReplayInputError(`--set ${setting}: expected NAME=VALUE, e.g. MEMORY_HEADROOM=0.8`);
    const [, name, value] = match as unknown as [string, string, string];
    try {
      overrides[name] = parseSetting(name, value);
    } catch (error) {
      if (error instanceof ConfigError)
        throw new ReplayInputError(`--set ${setting}: ${error.message}`);
      throw error;
    }
  }
  return overrides;
}

/** Parses a seq option (a non-negative integer). */
export function parseSeq(option: string, text: string): number {
  if (!/^\d+$/.test(text))
    throw new ReplayInputError(`${option} ${text}: expected a seq (a whole number)`);
  return Number(text);
}

/** Parses `--jobs` (a whole number, at least 1). */
export function parseJobs(text: string): number {
  if (!/^\d+$/.test(text) || Number(text) < 1)
    throw new ReplayInputError(`--jobs ${text}: expected a whole number of threads, at least 1`);
  return Number(text);
}

/** Writes a line to stdout. */
export function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** What every command that reads a log takes about its sources. */
export interface SourceOptions {
  /** Skip damaged or missing archive files (reported on stderr) instead of refusing them. */
  readonly skipDamaged?: boolean;
}

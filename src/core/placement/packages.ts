/**
 * Packages a call asks to install: each entry must be a PEP 508 requirement (with PEP 440 version
 * specifiers); duplicates are removed; entries whose distribution is already in the worker's base
 * image are dropped (unless they ask for extras). Parsing uses pip-requirements-js (an Ohm port of
 * PEP 508's grammar) and @renovatebot/pep440.
 */
import { validRange } from '@renovatebot/pep440';
import { parsePipRequirementsLine, type Requirement } from 'pip-requirements-js';
import { BoundedMap } from '../../shared/bounded-map.js';

/** One valid requirement. */
export interface PackageRequirement {
  /** The entry as the client wrote it (trimmed): what is installed and reported. */
  readonly entry: string;
  /** The distribution name normalized per PEP 503 (`NumPy` and `numpy` are the same). */
  readonly distribution: string;
  readonly extras: readonly string[];
  /** Two entries with the same key ask for the same thing. */
  readonly key: string;
}

/** The result of checking a call's package list. */
export type PackageCheck =
  | {
      readonly ok: true;
      readonly requirements: readonly PackageRequirement[];
      readonly duplicates: readonly string[];
    }
  | { readonly ok: false; readonly entry: string; readonly problem: string };

/** A PEP 503 normalized distribution name. */
export function normalizeDistribution(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

type Parsed = { ok: true; requirement: PackageRequirement } | { ok: false; problem: string };

function parseEntry(entry: string): Parsed {
  if (entry === '') return { ok: false, problem: 'it is empty' };
  if (entry.startsWith('-')) return { ok: false, problem: 'pip options are not requirements' };
  let requirement: Requirement | null;
  try {
    requirement = parsePipRequirementsLine(entry);
  } catch (error) {
    const detail = (error as Error).message.replace(/^Failed to parse requirements line\.\s*/, '');
    return { ok: false, problem: detail.split('\n')[0] ?? 'syntax error' };
  }
  if (requirement === null) return { ok: false, problem: 'it holds no requirement' };
  if (requirement.type !== 'ProjectName' && requirement.type !== 'ProjectURL') {
    return { ok: false, problem: 'requirement and constraint files are not allowed' };
  }
  const specs =
    requirement.type === 'ProjectName'
      ? (requirement.versionSpec ?? []).map((spec) => `${spec.operator}${spec.version}`)
      : [];
  for (const spec of specs) {
    if (!spec.startsWith('===') && !validRange(spec)) {
      return { ok: false, problem: `"${spec}" is not a PEP 440 version specifier` };
    }
  }
  const distribution = normalizeDistribution(requirement.name);
  const extras = (requirement.extras ?? []).map(normalizeDistribution).sort();
  const url = requirement.type === 'ProjectURL' ? requirement.url : '';
  const marker = requirement.environmentMarkerTree
    ? JSON.stringify(requirement.environmentMarkerTree)
    : '';
  const key = `${distribution}[${extras.join(',')}]${[...specs].sort().join(',')}@${url};${marker}`;
  return { ok: true, requirement: { entry, distribution, extras, key } };
}

/** A requirement entry parsed, or why it is not a requirement. */
export type ParsedEntry = Parsed;

/**
 * Parsed entries remembered between calls: parsing is pure, and the same few entries come back
 * call after call. Owned by whoever places many calls (the router, the replayer), never a module's;
 * bounded (oldest first out), so a stream of unique entries cannot grow memory without end.
 */
export class RequirementCache {
  private readonly parsed: BoundedMap<string, Parsed>;

  constructor(limit = 10_000) {
    this.parsed = new BoundedMap(limit);
  }

  /** The entry parsed, from the cache when it has been seen. */
  parse(entry: string): ParsedEntry {
    const known = this.parsed.get(entry);
    if (known) return known;
    const parsed = parseEntry(entry);
    this.parsed.set(entry, parsed);
    return parsed;
  }
}

/**
 * Validates every entry (the first invalid one is reported) and removes duplicates; `cache`
 * remembers parsed entries for the caller.
 */
export function checkPackages(
  entries: readonly string[] | null,
  cache?: RequirementCache,
): PackageCheck {
  const requirements: PackageRequirement[] = [];
  const duplicates: string[] = [];
  const seen = new Set<string>();
  for (const raw of entries ?? []) {
    const entry = raw.trim();
    const parsed = cache ? cache.parse(entry) : parseEntry(entry);
    if (!parsed.ok) return { ok: false, entry: raw, problem: parsed.problem };
    if (seen.has(parsed.requirement.key)) {
      duplicates.push(raw);
      continue;
    }
    seen.add(parsed.requirement.key);
    requirements.push(parsed.requirement);
  }
  return { ok: true, requirements, duplicates };
}

/** The packages to install and those dropped because the base image has their distribution. */
export interface PackagePlan {
  readonly packages: readonly string[];
  readonly skippedPackages: readonly string[];
}

/**
 * Drops requirements whose distribution (version ignored) is in `basePackages`, unless they ask
 * for extras, which the base image may lack. With no base list (no catalogue) nothing is dropped.
 */
export function planPackages(
  requirements: readonly PackageRequirement[],
  basePackages: readonly string[] | null,
): PackagePlan {
  if (requirements.length === 0) return { packages: [], skippedPackages: [] };
  const base = new Set((basePackages ?? []).map(normalizeDistribution));
  const packages: string[] = [];
  const skippedPackages: string[] = [];
  for (const requirement of requirements) {
    const inBase = base.has(requirement.distribution) && requirement.extras.length === 0;
    (inBase ? skippedPackages : packages).push(requirement.entry);
  }
  return { packages, skippedPackages };
}

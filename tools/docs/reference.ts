/**
 * The generated parts of docs/settings.md and docs/catalogue.md, rendered from the code's own
 * definitions: the settings table (src/shared/config.ts), every command's flags (the commander
 * definitions `--help` prints), the worker's flags and environment names (src/worker/options.ts)
 * and the catalogue's schema (src/events/catalogue.ts). `npm run docs:generate` writes them;
 * test/docs/references.test.ts fails when a doc and the code drift apart.
 */
import { Command, type Option } from 'commander';
import { addCertsCommand } from '../../src/cli/certs-command.js';
import { addRouterCommand, flagOf } from '../../src/cli/router-command.js';
import { addStatusCommand } from '../../src/cli/status/status-command.js';
import { addUpCommand } from '../../src/cli/up-command.js';
import { addWorkerCommand } from '../../src/cli/worker-command.js';
import { CatalogueSchema } from '../../src/events/catalogue.js';
import { SETTING_NAMES, SETTINGS, type SettingName } from '../../src/shared/config.js';
import { formatDuration, formatSize } from '../../src/shared/units.js';
import { WORKER_FLAGS } from '../../src/worker/options.js';

/** Settings the workers act on; the router records them in `RouterStarted`. */
const ENFORCED_BY_WORKERS: ReadonlySet<SettingName> = new Set([
  'WORKER_MAX_EXECUTORS',
  'WORKER_UTILIZATION_INTERVAL',
  'DIAL_TOTAL_TIMEOUT',
  'EXECUTOR_TTL',
]);

const UNITS = {
  duration: 'duration (`500ms`, `30s`, `10m`, `1h`, `7d`; a unit is required)',
  size: 'size (`512MiB`, `1GiB`, or bytes)',
  ratio: 'ratio in (0, 1]',
  count: 'whole number',
} as const;

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

function defaultOf(name: SettingName): string {
  const spec = SETTINGS[name];
  switch (spec.kind) {
    case 'duration':
      return formatDuration(spec.default);
    case 'size':
      return formatSize(spec.default);
    case 'ratio':
    case 'count':
      return String(spec.default);
  }
}

/** The numeric settings: environment name, flag, unit, default, meaning, who acts on it. */
export function settingsTable(): string {
  const rows = SETTING_NAMES.map((name) => {
    const spec = SETTINGS[name];
    const side = ENFORCED_BY_WORKERS.has(name) ? 'worker' : 'router';
    return `| \`${name}\` | \`${flagOf(name)}\` | ${UNITS[spec.kind]} | \`${defaultOf(name)}\` | ${cell(spec.help)} | ${side} |`;
  });
  return [
    '| environment | router flag | unit | default | meaning | enforced by |',
    '|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

/** The `readie` program with every command, as `bin/readie.js` builds it. */
function program(): Command {
  const readie = new Command('readie');
  addUpCommand(readie);
  addRouterCommand(readie);
  addWorkerCommand(readie);
  addStatusCommand(readie);
  addCertsCommand(readie);
  return readie;
}

const SETTING_FLAGS = new Set(SETTING_NAMES.map(flagOf));

function defaultText(option: Option): string {
  const value: unknown = option.defaultValue;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
    return `\`${String(value)}\``;
  }
  return '';
}

/** One command's flags (the router's numeric settings are in the settings table). */
export function commandFlags(name: string): string {
  const command = program().commands.find((candidate) => candidate.name() === name);
  if (command === undefined) throw new Error(`no command ${name}`);
  const rows = command.options
    .filter((option) => option.long === undefined || !SETTING_FLAGS.has(option.long))
    .map(
      (option) => `| \`${option.flags}\` | ${defaultText(option)} | ${cell(option.description)} |`,
    );
  return ['| flag | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

/** The worker's flags with their environment names (each flag also reads its variable). */
export function workerFlags(): string {
  const rows = WORKER_FLAGS.map(
    (flag) => `| \`${flag.flag}\` | \`${flag.env}\` | ${cell(flag.help)} |`,
  );
  return ['| flag | environment | meaning |', '|---|---|---|', ...rows].join('\n');
}

interface SchemaNode {
  readonly type?: string;
  readonly description?: string;
  readonly minimum?: number;
  readonly minLength?: number;
  readonly properties?: Readonly<Record<string, SchemaNode>>;
  readonly required?: readonly string[];
  readonly items?: SchemaNode;
  readonly patternProperties?: Readonly<Record<string, SchemaNode>>;
}

function typeOf(node: SchemaNode): string {
  if (node.type === 'array') return `list of ${node.items ? typeOf(node.items) : 'values'}`;
  if (node.patternProperties) {
    const value = Object.values(node.patternProperties)[0];
    return `object: name to ${value ? typeOf(value) : 'value'}`;
  }
  if (node.type === 'object') return 'object';
  const limits = [
    node.minimum === undefined ? '' : `>= ${node.minimum}`,
    node.minLength === undefined ? '' : 'not empty',
  ].filter((limit) => limit !== '');
  return `${node.type ?? 'value'}${limits.length ? ` (${limits.join(', ')})` : ''}`;
}

/** Every field of the catalogue, by path, from its schema. */
export function catalogueFields(): string {
  const rows: string[] = [];
  const walk = (node: SchemaNode, path: string): void => {
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      const here = path === '' ? name : `${path}.${name}`;
      const required = node.required?.includes(name) ? 'yes' : 'no';
      rows.push(
        `| \`${here}\` | ${typeOf(child)} | ${required} | ${cell(child.description ?? '')} |`,
      );
      if (child.type === 'array' && child.items?.properties) walk(child.items, `${here}[]`);
      const value = child.patternProperties ? Object.values(child.patternProperties)[0] : undefined;
      if (value?.properties) walk(value, `${here}.FLAVOR`);
    }
  };
  walk(CatalogueSchema, '');
  return ['| field | type | required | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** The generated sections, by the name their markers carry. */
export function generatedSections(): Readonly<Record<string, () => string>> {
  return {
    settings: settingsTable,
    'router-flags': () => commandFlags('router'),
    'worker-flags': workerFlags,
    'up-flags': () => commandFlags('up'),
    'status-flags': () => commandFlags('status'),
    'certs-flags': () => commandFlags('certs'),
    'catalogue-fields': catalogueFields,
  };
}

/**
 * `markdown` with each `<!-- generated: NAME -->` ... `<!-- end generated -->` section rendered
 * anew; throws on a marker whose name is unknown.
 */
export function regenerated(markdown: string): string {
  const sections = generatedSections();
  return markdown.replace(
    /(<!-- generated: ([\w-]+) \(npm run docs:generate\) -->\n)[\s\S]*?(<!-- end generated -->)/g,
    (_, open: string, name: string, close: string) => {
      const render = sections[name];
      if (render === undefined) throw new Error(`unknown generated section ${name}`);
      return `${open}${render()}\n${close}`;
    },
  );
}

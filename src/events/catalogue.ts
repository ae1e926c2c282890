/** The checkpoint catalogue (docs/catalogue.md), as carried by `CatalogueLoaded`, and its parsing. */
import { Type as T, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { explainMismatch } from './schema-errors.js';

const Cost = (description: string) => T.Number({ minimum: 0, description });

// The descriptions are the catalogue reference (docs/catalogue.md is generated from them).

/**
 * One checkpoint a worker of a flavor can restore. A checkpoint that holds loaded state (a
 * model's weights) is a *version* a tenant can pin (docs/tenant-routing.md): `onDemand` ones are
 * not built when a worker starts, only when a pre-warm or a cold load asks; `residentMemory` is
 * what keeping it resident costs (bytes, counted against the worker's resident budget); `setup`
 * is Python source run once when the checkpoint is built, after its imports (e.g. loading that
 * version's weights), whose names calls reach with `import readie_checkpoint`.
 */
export const CheckpointSpecSchema = T.Object({
  id: T.String({
    minLength: 1,
    description: 'the checkpoint ID: what calls name (checkpoint_id), events and logs show',
  }),
  modules: T.Array(T.String(), {
    description: 'top-level modules the checkpoint has already imported (numpy, torch, ...)',
  }),
  restoreCost: Cost('the estimated cost of restoring it, before any import it lacks'),
  onDemand: T.Optional(
    T.Boolean({
      description:
        'true: workers do not build it at start, only when a pre-warm or a cold load asks (a version a tenant pins)',
    }),
  ),
  residentMemory: T.Optional(
    T.Integer({
      minimum: 0,
      description:
        "bytes keeping it resident costs, counted against the worker's resident budget (--resident-memory)",
    }),
  ),
  setup: T.Optional(
    T.String({
      description:
        "Python source run once when the checkpoint is built, after its imports (e.g. loading a version's weights); calls reach its names with `import readie_checkpoint`",
    }),
  ),
  loadCost: T.Optional(
    T.Integer({
      minimum: 0,
      description:
        "ms a worker holding nothing of it takes to load it (a cold load of a pinned version: build, imports and setup); a pinned call whose caller's deadline leaves no more is shed instead of loading it (absent: the worker's last measured load)",
    }),
  ),
});

/** What a flavor's workers offer: checkpoints, the base image's distributions, cold-start cost. */
export const FlavorCatalogueSchema = T.Object({
  coldStartCost: Cost('the estimated cost of starting a fresh interpreter (no checkpoint)'),
  basePackages: T.Array(T.String(), {
    description:
      "distributions the workers' Python already has: a call's packages of these names are skipped",
  }),
  checkpoints: T.Array(CheckpointSpecSchema, {
    description:
      'the checkpoints workers of this flavor restore from (built at start unless onDemand)',
  }),
});

/** The whole catalogue: per flavor, plus the import cost table. */
export const CatalogueSchema = T.Object({
  flavors: T.Record(T.String(), FlavorCatalogueSchema, {
    description: 'per flavor (cpu, gpu): what its workers offer',
  }),
  importCosts: T.Record(T.String(), Cost('the cost of importing that module'), {
    description: 'the estimated cost of importing a module (by top-level name) a checkpoint lacks',
  }),
  defaultImportCost: Cost('the cost of importing a module importCosts does not name'),
});

/** One checkpoint a worker of a flavor can restore. */
export type CheckpointSpec = Static<typeof CheckpointSpecSchema>;
/** What a flavor's workers offer. */
export type FlavorCatalogue = Static<typeof FlavorCatalogueSchema>;
/** The checkpoint catalogue: per flavor its checkpoints, base packages and costs. */
export type Catalogue = Static<typeof CatalogueSchema>;

/** Catalogue text that is not JSON or not of the catalogue's shape; the message says where. */
export class CatalogueFormatError extends Error {
  override readonly name = 'CatalogueFormatError';
}

const checkCatalogue = TypeCompiler.Compile(CatalogueSchema);

/**
 * Parses and checks a catalogue's JSON text; `source` (usually its file) names it in errors.
 * Callers read the file: this module stays free of I/O.
 */
export function parseCatalogueJson(text: string, source: string): Catalogue {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CatalogueFormatError(
      `catalogue ${source}: not valid JSON (${(error as Error).message})`,
    );
  }
  if (!checkCatalogue.Check(value)) {
    const { field, problem } = explainMismatch(checkCatalogue, value);
    throw new CatalogueFormatError(
      `catalogue ${source}: ${field === undefined ? '' : `field "${field}" `}${problem} ` +
        '(docs/catalogue.md gives the format)',
    );
  }
  return value;
}

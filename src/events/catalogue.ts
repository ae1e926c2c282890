/** The checkpoint catalogue (docs/catalogue.md), as carried by `CatalogueLoaded`, and its parsing. */
import { Type as T, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { explainMismatch } from './schema-errors.js';

const Cost = (description: string) => T.Number({ minimum: 0, description });

// The descriptions are the catalogue reference (docs/catalogue.md is generated from them).

/** One checkpoint a worker of a flavor can restore. */
export const CheckpointSpecSchema = T.Object({
  id: T.String({
    minLength: 1,
    description: 'the checkpoint ID: what calls name (checkpoint_id), events and logs show',
  }),
  modules: T.Array(T.String(), {
    description: 'top-level modules the checkpoint has already imported (numpy, torch, ...)',
  }),
  restoreCost: Cost('the estimated cost of restoring it, before any import it lacks'),
});

/** What a flavor's workers offer: checkpoints, the base image's distributions, cold-start cost. */
export const FlavorCatalogueSchema = T.Object({
  coldStartCost: Cost('the estimated cost of starting a fresh interpreter (no checkpoint)'),
  basePackages: T.Array(T.String(), {
    description:
      "distributions the workers' Python already has: a call's packages of these names are skipped",
  }),
  checkpoints: T.Array(CheckpointSpecSchema, {
    description: 'the checkpoints workers of this flavor build at start and restore from',
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

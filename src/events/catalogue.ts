/** The checkpoint catalogue (docs/placement.md), as carried by `CatalogueLoaded`, and its parsing. */
import { Type as T, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { explainMismatch } from './schema-errors.js';

const Cost = T.Number({ minimum: 0 });

/** One checkpoint a worker of a flavor can restore. */
export const CheckpointSpecSchema = T.Object({
  id: T.String({ minLength: 1 }),
  modules: T.Array(T.String()),
  restoreCost: Cost,
});

/** What a flavor's workers offer: checkpoints, the base image's distributions, cold-start cost. */
export const FlavorCatalogueSchema = T.Object({
  coldStartCost: Cost,
  basePackages: T.Array(T.String()),
  checkpoints: T.Array(CheckpointSpecSchema),
});

/** The whole catalogue: per flavor, plus the import cost table. */
export const CatalogueSchema = T.Object({
  flavors: T.Record(T.String(), FlavorCatalogueSchema),
  importCosts: T.Record(T.String(), Cost),
  defaultImportCost: Cost,
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
        '(docs/placement.md, "Cost model", gives the format)',
    );
  }
  return value;
}

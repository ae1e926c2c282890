/** The checkpoint catalogue of DESIGN.md §4, as carried by `CatalogueLoaded`. */
import { Type as T, type Static } from '@sinclair/typebox';

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
/** The checkpoint catalogue of DESIGN.md §4. */
export type Catalogue = Static<typeof CatalogueSchema>;

/**
 * Which flavor a version runs on: the flavor whose catalogue lists it; when both list it, the
 * call's GPU flag picks. A version the catalogue in force does not list, or a GPU call for a
 * CPU-only version (or the reverse), is refused.
 */
import type { CatalogueInForce } from '../../../projections/cluster-state.js';
import type { Flavor } from '../../../events/schema.js';
import type { CheckpointSpec } from '../../../events/catalogue.js';

/** The flavors of the catalogue in force that list `version`, in name order. */
export function flavorsListing(catalogue: CatalogueInForce | null, version: string): string[] {
  if (!catalogue) return [];
  return Object.entries(catalogue.catalogue.flavors)
    .filter(([, flavor]) => flavor.checkpoints.some((checkpoint) => checkpoint.id === version))
    .map(([name]) => name)
    .sort();
}

/** The catalogue entry of `version` for `flavor`, if listed. */
export function versionSpec(
  catalogue: CatalogueInForce | null,
  flavor: string,
  version: string,
): CheckpointSpec | undefined {
  return catalogue?.catalogue.flavors[flavor]?.checkpoints.find((entry) => entry.id === version);
}

/** The flavor a call for `version` runs on, or why there is none. */
export type VersionFlavor =
  { readonly ok: true; readonly flavor: Flavor } | { readonly ok: false; readonly message: string };

/** The flavor a call for `version` runs on (`gpuCall`: the call is a GPU call). */
export function versionFlavor(
  catalogue: CatalogueInForce | null,
  version: string,
  gpuCall: boolean,
  listed: readonly string[] = flavorsListing(catalogue, version),
): VersionFlavor {
  const wanted: Flavor = gpuCall ? 'gpu' : 'cpu';
  // The common case first, without allocating: the call's own flavor lists the version.
  if (listed.includes(wanted)) return { ok: true, flavor: wanted };
  const listing = listed.filter((flavor): flavor is Flavor => flavor === 'cpu' || flavor === 'gpu');
  if (listing.length === 0) {
    return {
      ok: false,
      message: catalogue
        ? `version "${version}" is not in the catalogue in force (revision ${catalogue.revision})`
        : `version "${version}" is not in any catalogue: none is loaded`,
    };
  }
  return {
    ok: false,
    message: gpuCall
      ? `version "${version}" is listed for cpu workers only; a GPU call cannot be served by it`
      : `version "${version}" is listed for gpu workers only; make the call a GPU call (gpu=True)`,
  };
}

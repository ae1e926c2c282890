/** Reading the checkpoint catalogue (docs/placement.md) a worker builds its checkpoints from. */
import { readFile } from 'node:fs/promises';
import {
  CatalogueFormatError,
  parseCatalogueJson,
  type Catalogue,
  type CheckpointSpec,
} from '../../events/catalogue.js';

/** The catalogue file is missing, not JSON, or not of the catalogue's shape. */
export class CatalogueError extends Error {
  override readonly name = 'CatalogueError';
}

/** Reads a catalogue file. */
export async function loadCatalogue(path: string): Promise<Catalogue> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new CatalogueError(`cannot read the catalogue ${path}: ${(error as Error).message}`);
  }
  try {
    return parseCatalogueJson(text, path);
  } catch (error) {
    if (error instanceof CatalogueFormatError) throw new CatalogueError(error.message);
    throw error;
  }
}

/** The checkpoints a worker of `flavor` should build; none when the catalogue lacks the flavor. */
export function checkpointsFor(catalogue: Catalogue | null, flavor: string): CheckpointSpec[] {
  return catalogue?.flavors[flavor]?.checkpoints ?? [];
}

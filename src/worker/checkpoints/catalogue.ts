/** Reading the checkpoint catalogue (DESIGN.md §4) a worker builds its checkpoints from. */
import { readFile } from 'node:fs/promises';
import { Value } from '@sinclair/typebox/value';
import { CatalogueSchema, type Catalogue, type CheckpointSpec } from '../../events/catalogue.js';

/** The catalogue file is missing, not JSON, or not of the catalogue's shape. */
export class CatalogueError extends Error {
  override readonly name = 'CatalogueError';
}

/** Parses and validates catalogue text; `source` names it in errors. */
export function parseCatalogue(text: string, source: string): Catalogue {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CatalogueError(`${source}: not JSON (${(error as Error).message})`);
  }
  if (!Value.Check(CatalogueSchema, value)) {
    const first = Value.Errors(CatalogueSchema, value).First();
    const where = first ? `${first.path || '/'}: ${first.message}` : 'unknown problem';
    throw new CatalogueError(`${source}: not a checkpoint catalogue (${where})`);
  }
  return value;
}

/** Reads a catalogue file. */
export async function loadCatalogue(path: string): Promise<Catalogue> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new CatalogueError(`cannot read the catalogue ${path}: ${(error as Error).message}`);
  }
  return parseCatalogue(text, path);
}

/** The checkpoints a worker of `flavor` should build; none when the catalogue lacks the flavor. */
export function checkpointsFor(catalogue: Catalogue | null, flavor: string): CheckpointSpec[] {
  return catalogue?.flavors[flavor]?.checkpoints ?? [];
}

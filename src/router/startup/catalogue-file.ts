/**
 * Reading a checkpoint catalogue file (its format: docs/placement.md): JSON checked against `CatalogueSchema`, with
 * an error naming the file and the field. Its revision is a hash of its content, so loading the
 * same catalogue again changes nothing and any edit is a new revision.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CatalogueFormatError, parseCatalogueJson, type Catalogue } from '../../events/index.js';
import { RouterConfigError } from '../../core/errors.js';

/** A catalogue and its revision. */
export interface RevisedCatalogue {
  readonly revision: string;
  readonly catalogue: Catalogue;
}

/** The revision of a catalogue: `sha256:` and the first 16 hex digits of its canonical JSON. */
export function catalogueRevision(catalogue: Catalogue): string {
  const digest = createHash('sha256').update(JSON.stringify(catalogue)).digest('hex');
  return `sha256:${digest.slice(0, 16)}`;
}

/** Parses and checks a catalogue's JSON text; `source` names it in errors. */
export function parseCatalogue(text: string, source: string): RevisedCatalogue {
  let catalogue: Catalogue;
  try {
    catalogue = parseCatalogueJson(text, source);
  } catch (error) {
    if (error instanceof CatalogueFormatError) throw new RouterConfigError(error.message);
    throw error;
  }
  return { revision: catalogueRevision(catalogue), catalogue };
}

/** Reads and checks a catalogue file. */
export function readCatalogueFile(path: string): RevisedCatalogue {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new RouterConfigError(
      `--catalogue ${path}: cannot read it (${(error as Error).message})`,
    );
  }
  return parseCatalogue(text, path);
}

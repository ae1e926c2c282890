/**
 * The web page's files (`src/ui/assets/`: the dashboard of `readie ui` and the timeline both it
 * and `replay report --html` draw) and the charting library they use, Observable Plot with d3,
 * read from the installed packages: no CDN, nothing fetched at run time.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The page's own files. */
export const PAGE_FILES = [
  'index.html',
  'style.css',
  'timeline.js',
  'dashboard.js',
  'report.js',
] as const;
/** A page file's name. */
export type PageFile = (typeof PAGE_FILES)[number];

/** The libraries' browser bundles, by the name the page asks for. */
export const LIBRARY_FILES = ['d3.min.js', 'plot.umd.min.js'] as const;
/** A library bundle's name. */
export type LibraryFile = (typeof LIBRARY_FILES)[number];

const ASSETS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'assets');
const require = createRequire(import.meta.url);

/** Where a library's browser bundle is installed (its package's `umd` export). */
function libraryPath(name: LibraryFile): string {
  switch (name) {
    case 'd3.min.js':
      return join(dirname(require.resolve('d3')), 'd3.min.js');
    case 'plot.umd.min.js':
      return join(dirname(require.resolve('@observablehq/plot')), '..', 'dist', 'plot.umd.min.js');
  }
}

/** A page file's text. */
export function pageFile(name: PageFile): string {
  return readFileSync(join(ASSETS_DIR, name), 'utf8');
}

/** A library bundle's text. */
export function libraryFile(name: LibraryFile): string {
  return readFileSync(libraryPath(name), 'utf8');
}

/** True when `name` is a file the page may ask for. */
export function isAsset(name: string): name is PageFile | LibraryFile {
  return (
    (PAGE_FILES as readonly string[]).includes(name) ||
    (LIBRARY_FILES as readonly string[]).includes(name)
  );
}

/** An asset's text, whichever kind it is. */
export function assetText(name: PageFile | LibraryFile): string {
  return (LIBRARY_FILES as readonly string[]).includes(name)
    ? libraryFile(name as LibraryFile)
    : pageFile(name as PageFile);
}

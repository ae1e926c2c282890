/** Starting over a log (shell): reading the catalogue file. */
export * from './catalogue-file.js';

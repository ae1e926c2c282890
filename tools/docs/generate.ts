/** `npm run docs:generate`: renders the generated sections of docs/settings.md and docs/catalogue.md. */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { regenerated } from './reference.js';

for (const doc of ['settings.md', 'catalogue.md']) {
  const path = fileURLToPath(new URL(`../../docs/${doc}`, import.meta.url));
  const before = readFileSync(path, 'utf8');
  const after = regenerated(before);
  if (after !== before) writeFileSync(path, after);
  process.stdout.write(`${after === before ? 'unchanged' : 'wrote'} docs/${doc}\n`);
}

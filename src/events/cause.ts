/** Building the `cause` an append records (the vocabulary is `CAUSE_KINDS` in `schema.ts`). */
import type { CauseKind } from './schema.js';

/** The cause text of a trigger: its kind, and `:subject` for a kind that names one. */
export function causeOf(kind: CauseKind, subject?: string): string {
  return subject === undefined ? kind : `${kind}:${subject}`;
}

/**
 * Text from outside (a tenant's IDs, hints and packages, a worker's messages, a log's values) made
 * safe to print for a person: the one escaping function every human-readable output uses
 * (`readie status`, `readie pin`, the `replay` screens). A terminal obeys what it is sent: an
 * escape sequence can retitle the window, recolour or clear the screen, a carriage return or a
 * line break can forge a line, a bidi override can reverse what the operator reads. So every
 * character that is not plain text is written as a visible escape, and very long text is cut.
 */

/** The longest text `printable` returns (UTF-16 units); longer text is cut and says how much. */
export const MAX_PRINTABLE_LENGTH = 512;

/**
 * What is escaped: controls (C0, DEL, C1: `\p{Cc}`), format characters (bidi embeddings,
 * overrides, isolates and marks, zero-width characters, the BOM, the soft hyphen: `\p{Cf}`), the
 * line and paragraph separators, and halves of surrogate pairs standing alone.
 */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** Room kept for the note that says how much was cut. */
const CUT_NOTE_ROOM = 40;

function escaped(character: string): string {
  if (!UNPRINTABLE.test(character)) return character;
  const named = NAMED[character];
  if (named !== undefined) return named;
  const code = character.codePointAt(0) ?? 0;
  return code <= 0xff
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u{${code.toString(16).padStart(4, '0')}}`;
}

/**
 * `text` as a person may safely see it: each unprintable character as a visible escape (`\n`,
 * `\r`, `\t`, `\x1b`, `\u{202e}`), cut to {@link MAX_PRINTABLE_LENGTH} with a note of how many
 * characters were left out. Printable text (any script, emoji) is kept as it is. Idempotent:
 * what it returns comes back unchanged, so text escaped twice reads the same.
 */
export function printable(text: string): string {
  if (text.length <= MAX_PRINTABLE_LENGTH && !UNPRINTABLE.test(text)) return text;
  let out = '';
  let cutAt = -1;
  let consumedAtCut = 0;
  let consumed = 0;
  for (const character of text) {
    const piece = escaped(character);
    if (cutAt < 0 && out.length + piece.length > MAX_PRINTABLE_LENGTH - CUT_NOTE_ROOM) {
      cutAt = out.length;
      consumedAtCut = consumed;
    }
    out += piece;
    consumed += character.length;
    if (out.length > MAX_PRINTABLE_LENGTH) break;
  }
  if (out.length <= MAX_PRINTABLE_LENGTH) return out;
  return `${out.slice(0, cutAt)}...(${text.length - consumedAtCut} more characters)`;
}

/**
 * `text` with each unprintable character as a visible escape, as {@link printable} writes them,
 * but never cut: for a function's output, which `readie logs` shows whole.
 */
export function escapedWhole(text: string): string {
  if (!UNPRINTABLE.test(text)) return text;
  let out = '';
  for (const character of text) out += escaped(character);
  return out;
}

/** Multi-line text (a message that lays itself out in lines) with each line made printable. */
export function printableLines(text: string): string {
  return text.split('\n').map(printable).join('\n');
}

function isPlainObject(value: object): boolean {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * A copy of plain data (objects, arrays, maps, sets: an answer, an event, a folded state) with
 * every string in it made {@link printable}, keys of maps included; numbers, booleans and other
 * values are kept. What a renderer takes in before it lays anything out, so no field is missed.
 */
export function printableData<T>(value: T): T {
  return copyPrintable(value) as T;
}

function copyPrintable(value: unknown): unknown {
  if (typeof value === 'string') return printable(value);
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(copyPrintable);
  if (value instanceof Map) {
    return new Map([...value].map(([key, item]) => [copyPrintable(key), copyPrintable(item)]));
  }
  if (value instanceof Set) return new Set([...value].map(copyPrintable));
  if (!isPlainObject(value)) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [printable(key), copyPrintable(item)]),
  );
}

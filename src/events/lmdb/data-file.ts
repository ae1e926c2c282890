/**
 * A look at an LMDB data file before lmdb-js opens it. lmdb-js ends the process with SIGSEGV,
 * nothing said, on a data file that is not LMDB's (zeroed, or another file's bytes) and, opening
 * read-only, on an empty one (a log a writer is creating, or a crash's leftover): a router or a
 * `replay` pointed at a damaged log must say so instead.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';

/** What every LMDB meta page holds at `MAGIC_OFFSET` (little-endian), as lmdb-js's LMDB writes it. */
const MAGIC = 0xbeefc0de;
/** Where in a meta page the magic is: after lmdb-js's LMDB page header (page number, txn ID, flags). */
const MAGIC_OFFSET = 24;
/** The page sizes LMDB may use: the second meta page starts one page in. */
const PAGE_SIZES = [4096, 8192, 16384, 32768, 65536];
/** The bytes that hold both meta pages' magic, whatever the page size. */
const HEAD_BYTES = 65536 + MAGIC_OFFSET + 4;

/**
 * Why the data file at `path` cannot be opened, or undefined when it can (it holds LMDB's header
 * in either meta page, or it does not exist yet, or it is empty and a writer will create it).
 */
export function dataFileProblem(path: string, readOnly: boolean): string | undefined {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return undefined;
  }
  if (size === 0) return readOnly ? 'is empty (no LMDB header yet)' : undefined;
  const head = Buffer.alloc(Math.min(size, HEAD_BYTES));
  const fd = openSync(path, 'r');
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  const holdsMagic = (page: number) =>
    head.length >= page + MAGIC_OFFSET + 4 && head.readUInt32LE(page + MAGIC_OFFSET) === MAGIC;
  if ([0, ...PAGE_SIZES].some(holdsMagic)) return undefined;
  return `is not an LMDB data file (${size} bytes, no LMDB header in either meta page)`;
}

/**
 * The shared lock file of an LMDB log, read and written as another process's LMDB does: tests set
 * its transaction id back to stage what a racing read-only open or a killed writer leaves there.
 */
import { closeSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** Where LMDB's lock file keeps the id of the last committed transaction (after magic, format). */
const TXNID_OFFSET = 8;

/** The lock file of the log in `dir`, open until `close`. */
export function lockFile(dir: string) {
  const fd = openSync(join(dir, 'events.mdb-lock'), 'r+');
  const bytes = Buffer.alloc(8);
  return {
    txnid: (): bigint => {
      readSync(fd, bytes, 0, 8, TXNID_OFFSET);
      return bytes.readBigUInt64LE();
    },
    setTxnid: (id: bigint): void => {
      bytes.writeBigUInt64LE(id);
      writeSync(fd, bytes, 0, 8, TXNID_OFFSET);
    },
    close: () => closeSync(fd),
  };
}

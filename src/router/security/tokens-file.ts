/**
 * The tokens file: who may call the router. One credential a line, `KIND NAME TOKEN`:
 *
 * ```
 * # kind    name    token (in clear, or its sha256: digest)
 * tenant    acme    9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
 * worker    w1      sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae
 * operator  alice   ...
 * ```
 *
 * A tenant may have several tokens and so may a worker (that is how a token is rotated: add the
 * new one, reload, move the holder over, remove the old one, reload). A token names exactly one
 * principal: the same token on two lines, or the router's own token in the file, is refused.
 * Parsing is pure; reading the file and reloading it is `router-credentials.ts`.
 */
import { credentialDigest, stripComment, TokenSyntaxError } from '../../shared/bearer-token.js';
import { TokensFileError } from './errors.js';
import { LISTED_KINDS, type ListedKind, type Principal } from './principal.js';

/** Tenant and operator names: what a tenant ID may hold (no blanks, no newlines). */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;
/** Worker IDs, as `readie worker --id` accepts them. */
const WORKER_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** The principals a tokens file names, by the digest of their credential. */
export interface TokenTable {
  readonly principals: ReadonlyMap<string, Principal>;
  /** How many credentials of each kind the file lists. */
  readonly counts: Readonly<Record<ListedKind, number>>;
}

function principalOf(kind: ListedKind, name: string): Principal {
  switch (kind) {
    case 'tenant':
      return { kind, tenantId: name };
    case 'worker':
      return { kind, workerId: name };
    case 'operator':
      return { kind, name };
  }
}

/**
 * Parses a tokens file's text. `source` names it in errors; `routerDigest` is the digest of the
 * router's own token, which must not appear in the file. Throws TokensFileError naming the line.
 */
export function parseTokensFile(
  text: string,
  source: string,
  routerDigest: string | null = null,
): TokenTable {
  const principals = new Map<string, Principal>();
  const lineOf = new Map<string, number>();
  const counts: Record<ListedKind, number> = { tenant: 0, worker: 0, operator: 0 };
  const fail = (line: number, problem: string): never => {
    throw new TokensFileError(`${source}, line ${line}: ${problem}`);
  };
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = index + 1;
    const content = stripComment(raw);
    if (content === '') continue;
    const fields = content.split(/\s+/);
    if (fields.length !== 3) {
      fail(line, `expected "KIND NAME TOKEN" (3 fields), got ${fields.length}`);
    }
    const [kind, name, credential] = fields as [string, string, string];
    if (!(LISTED_KINDS as readonly string[]).includes(kind)) {
      fail(line, `kind "${kind}" is not one of ${LISTED_KINDS.join(', ')}`);
    }
    const pattern = kind === 'worker' ? WORKER_ID : NAME;
    if (!pattern.test(name)) {
      fail(
        line,
        kind === 'worker'
          ? `worker ID "${name}" must be 1-63 letters, digits, ".", "_" or "-"`
          : `${kind} name "${name}" must be 1-128 letters, digits, ".", "_", "@" or "-"`,
      );
    }
    let digest = '';
    try {
      digest = credentialDigest(credential);
    } catch (error) {
      if (error instanceof TokenSyntaxError) fail(line, error.message);
      throw error;
    }
    if (digest === routerDigest) {
      fail(
        line,
        "this is the router's own token (--router-token-file): give it a token of its own",
      );
    }
    const earlier = lineOf.get(digest);
    if (earlier !== undefined) {
      fail(line, `the same token as line ${earlier}: every credential names one principal`);
    }
    lineOf.set(digest, line);
    principals.set(digest, principalOf(kind as ListedKind, name));
    counts[kind as ListedKind] += 1;
  }
  return { principals, counts };
}

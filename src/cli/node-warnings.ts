/**
 * Node warnings the `readie` command keeps off its stderr. grpc-js sets the TLS server name to the
 * host it dials, an IP address too (`127.0.0.1:50051`), and Node then warns once per process that
 * RFC 6066 forbids an IP there (DEP0123) and sends no server name: nothing an operator can change
 * and nothing wrong with the connection, so the warning only hides the command's own words.
 */

/** The deprecation codes dropped. */
const QUIET_CODES: ReadonlySet<string> = new Set(['DEP0123']);

function codeOf(args: readonly unknown[]): string | undefined {
  const [typeOrOptions, code] = args;
  if (typeof code === 'string') return code;
  if (typeof typeOrOptions === 'object' && typeOrOptions !== null && 'code' in typeOrOptions) {
    const { code: named } = typeOrOptions as { code?: unknown };
    return typeof named === 'string' ? named : undefined;
  }
  return undefined;
}

/** Drops the warnings of {@link QUIET_CODES} from this process; every other warning is printed. */
export function quietNodeWarnings(): void {
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  const quiet = (warning: string | Error, ...rest: unknown[]): void => {
    const code = warning instanceof Error && 'code' in warning ? warning.code : codeOf(rest);
    if (typeof code === 'string' && QUIET_CODES.has(code)) return;
    emit(warning, ...rest);
  };
  process.emitWarning = quiet;
}

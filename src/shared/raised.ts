/**
 * A call whose function raised (docs/calls.md, "A function that raised"): the exception's type
 * name and the first line of its message, as the executor reports them at the end of a call
 * (docs/executor-protocol.md, `RESULT_END.raised`), the worker tells the router in the trailers
 * of its OK status, and `CallFinished.raised` records. The caller gets the exception itself (the
 * call succeeds at the gRPC level); this is what the call history, `readie call` and the call's
 * kept output say of it. Plain values and their bounds, no transport. Pure.
 *
 * Every hop bounds what it was given: the executor runs beside the tenant's code (which may write
 * to its socket), so the worker checks the frame, and the router checks the trailers again.
 */

/** The longest exception type name kept (UTF-16 units), e.g. `ValueError` or `pkg.mod.Error`. */
export const MAX_RAISED_TYPE_LENGTH = 256;
/** The longest exception message kept (UTF-16 units): the first line of `str(exception)`. */
export const MAX_RAISED_MESSAGE_LENGTH = 1024;

/** What a call's function raised. */
export interface Raised {
  /** The exception's type: its qualified name, with its module unless that is `builtins`. */
  readonly type: string;
  /** The first line of its message, bounded (empty when it has none). */
  readonly message: string;
}

/** The worker's trailer naming the type a call's function raised (percent-encoded UTF-8). */
export const RAISED_TRAILER = 'readie-raised';
/** The worker's trailer with the message's first line (percent-encoded UTF-8). */
export const RAISED_MESSAGE_TRAILER = 'readie-raised-message';
/**
 * The worker's trailer on a batch's OK status: how many of its inputs raised (decimal; each
 * caller got its exception in the input's outcome).
 */
export const INPUTS_RAISED_TRAILER = 'readie-inputs-raised';
/** The most inputs a batch carries (as the router refuses more), so the most that can raise. */
const MOST_BATCH_INPUTS = 1024;

const CUT = '... (cut)';

/** `text` in at most `limit` UTF-16 units, cut saying so (never halving a surrogate pair). */
function bounded(text: string, limit: number): string {
  if (text.length <= limit) return text;
  let end = limit - CUT.length;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return text.slice(0, end) + CUT;
}

/** Halves of surrogate pairs standing alone (they do not survive UTF-8): each becomes U+FFFD. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/gu;

/**
 * `raised` made safe to keep: well-formed text, a type name without whitespace (`Exception` when
 * none is left), a message on one line (line breaks become spaces), each within its bound.
 */
export function boundedRaised(raised: Raised): Raised {
  const type = raised.type.replace(LONE_SURROGATE, '\ufffd').replace(/\s+/gu, '');
  return {
    type: bounded(type === '' ? 'Exception' : type, MAX_RAISED_TYPE_LENGTH),
    message: bounded(
      raised.message.replace(LONE_SURROGATE, '\ufffd').replace(/[\r\n\u2028\u2029]+/gu, ' '),
      MAX_RAISED_MESSAGE_LENGTH,
    ),
  };
}

/** `raised` as the trailers of a worker's OK status. */
export function raisedTrailers(raised: Raised): Readonly<Record<string, string>> {
  const { type, message } = boundedRaised(raised);
  return {
    [RAISED_TRAILER]: encodeURIComponent(type),
    [RAISED_MESSAGE_TRAILER]: encodeURIComponent(message),
  };
}

function decoded(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/**
 * What a worker's trailers say the function raised, bounded again; null when they say nothing
 * (or the type is not percent-encoded text: a message that is not is kept empty).
 */
export function raisedOfTrailers(trailers: Readonly<Record<string, string>>): Raised | null {
  const type = decoded(trailers[RAISED_TRAILER]);
  if (type === undefined) return null;
  return boundedRaised({ type, message: decoded(trailers[RAISED_MESSAGE_TRAILER]) ?? '' });
}

/** How a person reads it: `raised ValueError: bad input` (`raised KeyError` with no message). */
export function raisedLine(raised: Raised): string {
  return raised.message === ''
    ? `raised ${raised.type}`
    : `raised ${raised.type}: ${raised.message}`;
}

/** How many of a batch's inputs raised, as the trailers of a worker's OK status. */
export function inputsRaisedTrailers(count: number): Readonly<Record<string, string>> {
  return { [INPUTS_RAISED_TRAILER]: String(count) };
}

/**
 * How many of a batch's inputs raised, as a worker's trailers say; null when they say nothing, or
 * nothing a batch could have (not a whole number up to the most inputs a batch carries).
 */
export function inputsRaisedOfTrailers(trailers: Readonly<Record<string, string>>): number | null {
  const text = trailers[INPUTS_RAISED_TRAILER];
  if (text === undefined || !/^\d{1,4}$/u.test(text)) return null;
  const count = Number(text);
  return count <= MOST_BATCH_INPUTS ? count : null;
}

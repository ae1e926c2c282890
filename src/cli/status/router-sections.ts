/**
 * The routers part of `readie status`: each listed router's role (the one that leads, those that
 * stand by and which leader they name, those that did not answer and why). Pure.
 */
import { causeOf, hintFor } from '../../client/error-hints.js';
import { printable } from '../../shared/printable.js';
import type { RouterReply } from '../admin-routers.js';

/** Why a router gave no answer, in the clients' words (the hint, else the router's message). */
function why(reply: Exclude<RouterReply<unknown>, { role: 'leads' }>): string {
  const { error } = reply;
  if (reply.role === 'stands by') {
    return reply.leader === undefined ? 'no router leads yet' : `the leader is ${reply.leader}`;
  }
  if (error.code === undefined) return error.message;
  const said = error.details
    .replace(/\s+/g, ' ')
    .replace(/\.? Resolution note: ?$/, '')
    .trim();
  if (reply.role === 'failed') return `${error.codeName}: ${said}`;
  // Unreachable: the clients' hint says why (nothing listens, a TLS mismatch, a name that does not resolve).
  const hint = hintFor(
    causeOf({ code: error.code, details: error.details, trailers: {}, insecure: false }),
    { address: reply.address, insecure: false, trailers: {} },
  );
  return `${error.codeName}: ${hint ?? said}`;
}

/** One line per listed router: its address and role (what a router said, made printable). */
export function renderRouters(replies: readonly RouterReply<unknown>[]): string {
  const width = Math.max(...replies.map((reply) => printable(reply.address).length));
  return `${replies
    .map((reply) => {
      const address = printable(reply.address).padEnd(width);
      switch (reply.role) {
        case 'leads':
          return `${address}  leads`;
        case 'stands by':
          return `${address}  stands by (${printable(why(reply))})`;
        case 'unreachable':
          return `${address}  not answering (${printable(why(reply))})`;
        case 'failed':
          return `${address}  refused (${printable(why(reply))})`;
      }
    })
    .join('\n')}\n`;
}

/** The routers as `--json` has them: address, role, the leader a standby named, the error. */
export function routersJson(replies: readonly RouterReply<unknown>[]): object[] {
  return replies.map((reply) =>
    reply.role === 'leads'
      ? { address: reply.address, role: 'leader' }
      : {
          address: reply.address,
          role: reply.role === 'stands by' ? 'standby' : reply.role,
          ...(reply.role === 'stands by' && reply.leader !== undefined
            ? { leader: reply.leader }
            : {}),
          error: reply.error.message,
        },
  );
}

/**
 * Who a credential names. A tenant's credential names the tenant its calls are for; a worker's
 * names the one worker ID it may report as; an operator's names the operator (for the logs); the
 * router's own credential is the one it presents to workers. `anyone` is what the development
 * modes make of every caller: the single shared token, or no credentials at all.
 */

/** An authenticated caller. */
export type Principal =
  | { readonly kind: 'tenant'; readonly tenantId: string }
  | { readonly kind: 'worker'; readonly workerId: string }
  | { readonly kind: 'operator'; readonly name: string }
  | { readonly kind: 'router' }
  | { readonly kind: 'anyone'; readonly mode: 'single-token' | 'none' };

/** The kinds of principal. */
export type PrincipalKind = Principal['kind'];

/** The kinds a tokens file may list (the router's own credential comes from its own file). */
export const LISTED_KINDS = ['tenant', 'worker', 'operator'] as const;

/** A kind a tokens file may list. */
export type ListedKind = (typeof LISTED_KINDS)[number];

/** A principal in an operator's words, for messages and logs (never the credential itself). */
export function describePrincipal(principal: Principal): string {
  switch (principal.kind) {
    case 'tenant':
      return `a tenant credential (tenant ${principal.tenantId})`;
    case 'worker':
      return `a worker credential (worker ${principal.workerId})`;
    case 'operator':
      return `an operator credential (${principal.name})`;
    case 'router':
      return "the router's own credential";
    case 'anyone':
      return principal.mode === 'single-token' ? 'the shared development token' : 'no credential';
  }
}

/** The tenant a principal's calls are for: null unless it is a tenant's credential. */
export function tenantOf(principal: Principal): string | null {
  return principal.kind === 'tenant' ? principal.tenantId : null;
}

/** Fields for a log line naming the caller (kind and name; never the credential). */
export function principalLogFields(principal: Principal): Record<string, string> {
  switch (principal.kind) {
    case 'tenant':
      return { caller: 'tenant', tenantId: principal.tenantId };
    case 'worker':
      return { caller: 'worker', callerWorkerId: principal.workerId };
    case 'operator':
      return { caller: 'operator', operator: principal.name };
    case 'router':
      return { caller: 'router' };
    case 'anyone':
      return { caller: principal.mode };
  }
}

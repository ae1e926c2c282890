/**
 * What a tenant ID an operator names in a table (pins, quotas) may be. Pure.
 */

/** The longest tenant ID a table may name. */
export const MAX_TENANT_ID_LENGTH = 256;

/**
 * Why `tenantId` cannot name an entry of the `table` (`pin`, `quota`), or null when it can.
 * Control characters could make two keys hash alike ("\n" separates a hash's parts).
 */
export function tenantIdProblem(tenantId: string, table: string): string | null {
  if (tenantId === '') return `a ${table} needs a tenant (--tenant)`;
  if (tenantId.length > MAX_TENANT_ID_LENGTH) {
    return `a tenant ID has at most ${MAX_TENANT_ID_LENGTH} characters`;
  }
  if (/\p{Cc}/u.test(tenantId)) return 'a tenant ID may not hold control characters';
  return null;
}

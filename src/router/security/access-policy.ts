/**
 * Which credential may call which service of the router. Anything not listed here is refused
 * (`PERMISSION_DENIED`), so a service added later is closed until it is given an entry. The
 * standard health service is open to all, credential or not, so load balancers can probe it.
 */
import { describePrincipal, type Principal, type PrincipalKind } from './principal.js';

/** The services and the one kind of credential each serves. */
const SERVICE_ACCESS: Readonly<Record<string, { kind: PrincipalKind; words: string }>> = {
  'readie.v1.ProxyService': { kind: 'tenant', words: 'calls take a tenant (client) credential' },
  'readie.v1.TenantService': { kind: 'tenant', words: 'it answers tenant (client) credentials' },
  'readie.v1.RegistryService': { kind: 'worker', words: 'reports take a worker credential' },
  'readie.v1.AdminService': { kind: 'operator', words: 'it takes an operator credential' },
};

/** Paths served without any credential. */
const OPEN_PATHS = /^\/grpc\.health\.v1\.Health\//;

/** Whether `path` (`/package.Service/Method`) is served without a credential. */
export function isOpenPath(path: string): boolean {
  return OPEN_PATHS.test(path);
}

/** The service of a method path (`readie.v1.ProxyService` of `/readie.v1.ProxyService/X`). */
export function serviceOf(path: string): string {
  return path.split('/')[1] ?? '';
}

/** Why `principal` may not call `path`, or null when it may. */
export function accessProblem(principal: Principal, path: string): string | null {
  if (principal.kind === 'anyone' || isOpenPath(path)) return null;
  const service = serviceOf(path);
  const access = SERVICE_ACCESS[service];
  if (access === undefined) return `${service || path} is not a service this router offers`;
  if (access.kind === principal.kind) return null;
  return `${describePrincipal(principal)} may not call ${service}: ${access.words}`;
}

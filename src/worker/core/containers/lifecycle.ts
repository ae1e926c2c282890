/**
 * Where a container is in its life (docs/container-lifecycle.md): `standby` (restored ahead of
 * demand, not yet known to the router), `busy` (a call runs in it), `ready` (idle, kept for its
 * session), `removed` (being destroyed).
 */
export type ContainerLifecycle = 'standby' | 'busy' | 'ready' | 'removed';

/**
 * Properties of the rendezvous subsets over random fleets: a worker leaving moves only the keys
 * whose subset held it (and each such key gains exactly the next worker), raising k adds exactly
 * the next worker, and placement through the subset cache decides as without it.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { place, PlacementCaches } from '../../src/core/placement/index.js';
import {
  candidateIds,
  rankedByScore,
  rendezvousSubset,
  SubsetCache,
} from '../../src/core/placement/index.js';
import { applyInPlace, initialState, type ClusterState } from '../../src/projections/index.js';
import type { NewEvent } from '../../src/events/index.js';
import { atOf, registered } from '../support/events.js';
import { pinnedCall, residency, revised, routerWithVersions } from '../support/routing.js';

const fleetArbitrary = fc.record({
  workers: fc.uniqueArray(fc.stringMatching(/^[a-z0-9-]{1,12}$/), { minLength: 2, maxLength: 40 }),
  tenants: fc.uniqueArray(fc.stringMatching(/^[a-z0-9]{1,10}$/), { minLength: 1, maxLength: 30 }),
  k: fc.integer({ min: 1, max: 5 }),
  leaving: fc.nat(),
});

describe('rendezvous subsets (properties)', () => {
  it('a worker leaving moves only the keys whose subset held it, each gaining the next worker', () => {
    fc.assert(
      fc.property(fleetArbitrary, ({ workers, tenants, k, leaving }) => {
        const gone = workers[leaving % workers.length] as string;
        const rest = workers.filter((id) => id !== gone);
        for (const tenant of tenants) {
          const before = rendezvousSubset(tenant, 'v1', workers, k);
          const after = rendezvousSubset(tenant, 'v1', rest, k);
          if (!before.includes(gone)) {
            expect(after).to.deep.equal(before);
            continue;
          }
          const kept = before.filter((id) => id !== gone);
          expect(after.slice(0, kept.length)).to.deep.equal(kept);
          const next = rankedByScore(tenant, 'v1', workers)[k]?.workerId;
          if (next !== undefined) expect(after).to.include(next);
          expect(after).to.have.length(Math.min(k, rest.length));
        }
      }),
      { numRuns: 200 },
    );
  });

  it('raising k adds exactly the next worker and moves none', () => {
    fc.assert(
      fc.property(fleetArbitrary, ({ workers, tenants, k }) => {
        for (const tenant of tenants) {
          const smaller = rendezvousSubset(tenant, 'v1', workers, k);
          const larger = rendezvousSubset(tenant, 'v1', workers, k + 1);
          expect(larger.slice(0, smaller.length)).to.deep.equal(smaller);
          expect(larger.length - smaller.length).to.equal(k < workers.length ? 1 : 0);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('does not depend on the order the fleet is listed in', () => {
    fc.assert(
      fc.property(fleetArbitrary, ({ workers, tenants, k }) => {
        const reversed = [...workers].reverse();
        for (const tenant of tenants) {
          expect(rendezvousSubset(tenant, 'v1', reversed, k)).to.deep.equal(
            rendezvousSubset(tenant, 'v1', workers, k),
          );
        }
      }),
      { numRuns: 100 },
    );
  });

  it('the subset cache answers the full computation after any joins, leaves and flavor changes', () => {
    fc.assert(
      fc.property(
        fleetArbitrary,
        fc.array(
          fc.record({
            op: fc.constantFrom('leave', 'join', 'gpu', 'error'),
            at: fc.nat(),
            k: fc.integer({ min: 1, max: 6 }),
          }),
          { maxLength: 60 },
        ),
        ({ workers, tenants }, steps) => {
          const cache = new SubsetCache();
          let state: ClusterState = initialState();
          let seq = 0;
          const add = (event: NewEvent) => {
            seq += 1;
            state = applyInPlace(state, { seq, at: atOf(seq), cause: null, ...event }, cache);
          };
          for (const id of workers) add(registered(id));
          for (const { op, at, k } of steps) {
            const worker = workers[at % workers.length] as string;
            if (op === 'leave') add({ type: 'WorkerLeaving', workerId: worker });
            else if (op === 'join') add(registered(worker));
            else if (op === 'gpu') add(registered(worker, { flavor: 'gpu' }));
            else add(registered(worker, { status: 'error', error: 'broken' }));
            for (const tenant of tenants.slice(0, 5)) {
              for (const flavor of ['cpu', 'gpu'] as const) {
                const expected = rendezvousSubset(
                  tenant,
                  'v1',
                  candidateIds(state.workers.values(), flavor),
                  k,
                );
                expect(cache.subset(state.workers, tenant, 'v1', flavor, k)).to.deep.equal(
                  expected,
                );
              }
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('placement through the subset cache decides exactly as without it, as the fleet changes', () => {
    fc.assert(
      fc.property(
        fleetArbitrary,
        fc.array(
          fc.record({ op: fc.constantFrom('leave', 'join', 'load', 'call'), at: fc.nat() }),
          {
            maxLength: 40,
          },
        ),
        ({ workers, tenants, k }, steps) => {
          const caches = new PlacementCaches();
          let state: ClusterState = initialState();
          let seq = 0;
          const add = (event: NewEvent) => {
            seq += 1;
            state = applyInPlace(state, { seq, at: atOf(seq), cause: null, ...event }, caches);
          };
          for (const event of routerWithVersions()) add(event);
          for (const id of workers) add(registered(id));
          tenants.forEach((tenant, index) => add(revised(index + 1, tenant, 'policy-v1', k)));
          for (const { op, at } of steps) {
            const worker = workers[at % workers.length] as string;
            const tenant = tenants[at % tenants.length] as string;
            if (op === 'leave') add({ type: 'WorkerLeaving', workerId: worker });
            else if (op === 'join') add(registered(worker));
            else if (op === 'load') add(residency(worker, 'policy-v1', 'resident'));
            else {
              const call = pinnedCall(`r${seq}`, tenant);
              expect(place(state, call, { caches })).to.deep.equal(place(state, call));
            }
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});

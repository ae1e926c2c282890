/** Checkpoint catalogues for worker tests. */
import type { Catalogue } from '../../src/events/catalogue.js';

/** A catalogue with a numpy checkpoint, a bare one, and one whose module cannot be imported. */
export const CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: ['numpy'],
      checkpoints: [
        { id: 'checkpoint_0', modules: [], restoreCost: 60 },
        { id: 'ckpt-numpy', modules: ['numpy'], restoreCost: 90 },
        { id: 'ckpt-broken', modules: ['readie_no_such_module'], restoreCost: 10 },
      ],
    },
    gpu: {
      coldStartCost: 900,
      basePackages: [],
      checkpoints: [{ id: 'gpu-only', modules: [], restoreCost: 1 }],
    },
  },
  importCosts: { numpy: 150 },
  defaultImportCost: 100,
};

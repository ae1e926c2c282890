/** The catalogue a local cluster runs under: a bare checkpoint, and a numpy one where numpy imports. */
import type { Catalogue } from '../events/catalogue.js';

/** The default catalogue; `numpy` says whether the workers' Python can import numpy. */
export function defaultCatalogue(numpy: boolean): Catalogue {
  const checkpoints = [{ id: 'checkpoint_0', modules: [] as string[], restoreCost: 60 }];
  if (numpy) checkpoints.push({ id: 'ckpt-numpy', modules: ['numpy'], restoreCost: 90 });
  return {
    flavors: {
      cpu: {
        coldStartCost: 900,
        basePackages: numpy ? ['numpy', 'cloudpickle'] : ['cloudpickle'],
        checkpoints,
      },
    },
    importCosts: { numpy: 150, pandas: 600, scipy: 400, torch: 2000 },
    defaultImportCost: 100,
  };
}

// Loads the plain-JS packages the sources import (the entry points they name) before tsx's loader
// is registered. Through the loader every module costs a trip to the loader's thread and back:
// TypeBox's ESM build alone is some 220 modules, about 370 ms through the loader and 150 ms
// without it. A package loaded here is the same module the sources import later (one URL, one
// instance).
export async function preloadDependencies() {
  await Promise.all(
    ['@sinclair/typebox', '@sinclair/typebox/compiler', '@sinclair/typebox/errors'].map(
      (name) => import(name),
    ),
  );
}

/** Every placement filter, in the order they run and explanations list them. All must pass. */
import type { Filter } from '../filter.js';
import { containerCount } from './container-count.js';
import { flavor } from './flavor.js';
import { gpuMemoryHeadroom } from './gpu-memory-headroom.js';
import { memoryHeadroom } from './memory-headroom.js';

/** The filters, in order. */
export const FILTERS: readonly Filter[] = [
  flavor,
  memoryHeadroom,
  gpuMemoryHeadroom,
  containerCount,
];

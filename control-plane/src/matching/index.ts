/** The matcher as the benchmarks drive it (`@gpufarm/control-plane/matching`). */
export * from './matcher.js';

/** The agent gateway's stores as the benchmarks use them (`@gpufarm/control-plane/agent-gateway`). */
export * from './image-store.js';

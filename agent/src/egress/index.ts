/** The job network's egress rules (`@gpufarm/agent/egress`), for the egress benchmark. */
export * from './network.js';

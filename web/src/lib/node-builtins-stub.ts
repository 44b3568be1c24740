/**
 * What the dashboard gets for `node:net` and `node:crypto` (vite.config.ts aliases both here).
 * `@gpufarm/shared` is one barrel that also holds Node-only modules (host-name checks, execution
 * records); the build drops them by tree-shaking, but the dev server loads every module of the
 * barrel, and an import of a Node builtin would throw there. Nothing in the dashboard calls these.
 */
const nodeOnly =
  (name: string) =>
  (..._args: unknown[]): never => {
    throw new Error(`${name} is Node-only: the @gpufarm/shared code that needs it does not run in the dashboard`);
  };

export const isIPv4 = nodeOnly('node:net isIPv4');
export const isIPv6 = nodeOnly('node:net isIPv6');
export const createHash = nodeOnly('node:crypto createHash');
export const createPrivateKey = nodeOnly('node:crypto createPrivateKey');
export const createPublicKey = nodeOnly('node:crypto createPublicKey');
export const sign = nodeOnly('node:crypto sign');
export const verify = nodeOnly('node:crypto verify');

/** The escrow chain as other packages use it (`@gpufarm/control-plane/chain`): the client, the deployer, the deployment file. */
export * from './client.js';
export * from './deploy.js';
export * from '../deployment-file.js';

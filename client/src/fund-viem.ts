// What fundJob uses of viem, named: loaded by its dynamic import, so that a program or `gf`
// command that never funds does not load viem, and a browser bundle keeps viem tree-shaken.
export { createPublicClient, custom, decodeFunctionData, erc20Abi, isAddressEqual } from 'viem';

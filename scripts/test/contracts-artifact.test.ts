import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { compileContracts } from '../src/chain/compile.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

t.test('the committed contract artifacts match a fresh compile of contracts/src', async (t) => {
  const { files, contracts } = compileContracts(ROOT);
  for (const [path, text] of Object.entries(files)) {
    t.equal(readFileSync(`${ROOT}/${path}`, 'utf8'), text, `${path} is up to date (run npm run compile-contracts)`);
  }
  t.ok(contracts.GpuFarmEscrow!.bytecode.length > 1000, 'the escrow has bytecode');
  t.ok(contracts.GpuFarmEscrow!.abi.some((e) => (e as { name?: string }).name === 'JobFunded'), 'the ABI has JobFunded');
});

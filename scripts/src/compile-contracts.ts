import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { compileContracts } from './chain/compile.js';

/** `npm run compile-contracts`: compiles contracts/src with solc-js and writes the committed artifacts. */
const root = fileURLToPath(new URL('../../', import.meta.url));
const { compiler, files } = compileContracts(root);
for (const [path, text] of Object.entries(files)) {
  writeFileSync(`${root}/${path}`, text);
  console.log(`wrote ${path}`);
}
console.log(`compiled with ${compiler}`);

import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { checkImportGraph, fileLoops, folderLoops, importEdges, type SourceFile } from '@gpufarm/shared/testing/import-graph';

/**
 * The agent's layering, read from its source with the TypeScript parser: no import loop between
 * two folders of `src/` (a file at the root, such as `main.ts`, is a node of its own), and none
 * between two files. The Engine adapter (`docker/`) and the job's vocabulary (`job/`) sit below
 * the runtime, egress, restore and artifacts; the runner (`runner/`) above them.
 */

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');
checkImportGraph(t, SRC);

t.test('args: the checks see a planted loop', async (t) => {
  const sample: SourceFile[] = [
    { path: 'runtime/start.ts', text: "import { egress } from '../egress/network.js';\nexport const start = () => egress();\n" },
    { path: 'egress/network.ts', text: "import { start } from '../runtime/start.js';\nexport const egress = () => start();\n" },
    { path: 'docker/labels.ts', text: 'export const label = 1;\n' },
    { path: 'runtime/hooks.ts', text: "import { label } from '../docker/labels.js';\nexport const hooks = label;\n" },
  ];
  const sampleEdges = importEdges(sample);
  t.same(folderLoops(sampleEdges), ['folders egress, runtime import each other:\n  egress -> runtime: egress/network.ts:1 imports runtime/start.ts\n  runtime -> egress: runtime/start.ts:1 imports egress/network.ts']);
  t.same(fileLoops(sampleEdges), ['files import each other: egress/network.ts -> runtime/start.ts -> egress/network.ts']);
  t.same(folderLoops(importEdges(sample.slice(2))), [], 'an import down into docker/ is no loop');
});

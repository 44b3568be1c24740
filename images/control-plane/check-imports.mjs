// Run in the image's build stage by its node: every package dist/main.js imports resolves from
// /app, so the staged node_modules lacks nothing (a missing one would fail only when the route
// that loads it runs). A file beside dist/ resolves packages exactly as dist/main.js does.
import { readFileSync } from 'node:fs';
import process from 'node:process';
import { URL } from 'node:url';

const bundle = readFileSync(new URL('dist/main.js', import.meta.url), 'utf8');
const imports = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\(\s*)["']([^"'.][^"']*)["']/g;
const specifiers = [...new Set([...bundle.matchAll(imports)].map((m) => m[1]).filter((s) => !s.startsWith('node:')))];
const missing = [];
for (const specifier of specifiers) {
  try {
    import.meta.resolve(specifier);
  } catch (err) {
    missing.push(`  ${specifier}: ${err.message}`);
  }
}
if (specifiers.length === 0 || missing.length > 0) {
  process.stderr.write(specifiers.length === 0 ? 'check-imports: found no imports in dist/main.js\n' : `check-imports: unresolved imports:\n${missing.join('\n')}\n`);
  process.exit(1);
}
process.stdout.write(`check-imports: ${specifiers.length} imports resolve\n`);

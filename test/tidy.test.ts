// Goal: the rules that the compiler cannot check hold for every source file (STYLE.md §1, §8):
// imports point down the layers and never sideways, only the index store imports lmdb, and no
// code outside the error catalogue builds a bare Error.
// Method: read src/**/*.ts as text and check each import and each `new Error(`.
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const rank: Record<string, number> = { util: 0, format: 1, security: 1, engine: 2, workers: 3, http: 4, gateway: 5, admin: 5, cli: 6 };

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

const files = sources(join(root, 'src')).map((path) => ({ path: relative(root, path), text: readFileSync(path, 'utf8') }));

t.test('every source folder has a layer', async (t) => {
  for (const file of files) t.ok((file.path.split('/')[1] ?? '') in rank, file.path);
});

t.test('imports point down, never sideways', async (t) => {
  for (const file of files) {
    const layer = file.path.split('/')[1] ?? '';
    for (const match of file.text.matchAll(/from '(\.[^']+)'/g)) {
      const target = join(file.path, '..', match[1] ?? '').split('/');
      if (target[0] !== 'src') continue;
      const targetLayer = target[1] ?? '';
      const ok = targetLayer === layer || (rank[targetLayer] ?? 99) < (rank[layer] ?? -1);
      t.ok(ok, `${file.path} imports ${match[1]} (${layer} → ${targetLayer})`);
    }
  }
});

t.test('only the index store imports lmdb', async (t) => {
  for (const file of files) {
    if (/from 'lmdb'/.test(file.text)) t.equal(file.path, 'src/engine/index/store.ts');
  }
});

t.test('no bare Error outside the catalogue', async (t) => {
  for (const file of files) {
    if (file.path === 'src/util/errors.ts') continue;
    t.notMatch(file.text, /new Error\(/, file.path);
  }
});

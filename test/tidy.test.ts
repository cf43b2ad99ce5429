// Goal: the rules that the compiler cannot check hold for every source file (STYLE.md §1, §8):
// imports point down the layers and never sideways, only the index store imports lmdb, only
// the libc module loads koffi, and no code outside the error catalogue builds a bare Error. The
// service never imports the benchmark (bench/, a client of the public port); the binaries reach
// it only through bench/run.js.
// Method: read src/**/*.ts and bin/*.ts as text and check each import and each `new Error(`.
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const rank: Record<string, number> = {
  util: 0,
  format: 1,
  security: 1,
  engine: 2,
  workers: 3,
  http: 4,
  gateway: 5,
  admin: 5,
  cli: 6,
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

function read(dir: string): { path: string; text: string }[] {
  return sources(join(root, dir)).map((path) => ({
    path: relative(root, path),
    text: readFileSync(path, 'utf8'),
  }));
}

const files = read('src');

/** Relative import targets, static and dynamic, as paths from the repository root. */
function imports(file: { path: string; text: string }): { spec: string; target: string }[] {
  return [...file.text.matchAll(/(?:from |import\()'(\.[^']+)'/g)].map((match) => {
    const spec = match[1] ?? '';
    return { spec, target: join(file.path, '..', spec) };
  });
}

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
      t.ok(ok, `${file.path} imports ${match[1]!} (${layer} → ${targetLayer})`);
    }
  }
});

t.test('the service imports only itself: never bench/, bin/ or test/', async (t) => {
  for (const file of files) {
    for (const { spec, target } of imports(file)) {
      t.ok(target.startsWith('src/'), `${file.path} imports ${spec}`);
    }
  }
});

t.test('the binaries import src/cli/ and, for `lightwell bench`, bench/run.js', async (t) => {
  const bins = read('bin');
  t.ok(bins.length > 0, 'bin/ has sources');
  for (const file of bins) {
    for (const { spec, target } of imports(file)) {
      const bench = file.path === 'bin/lightwell.ts' && target === 'bench/run.js';
      const ok = target.startsWith('src/cli/') || bench;
      t.ok(ok, `${file.path} imports ${spec}`);
    }
  }
});

t.test('only the index store imports lmdb', async (t) => {
  for (const file of files) {
    if (/from 'lmdb'/.test(file.text)) t.equal(file.path, 'src/engine/index/store.ts');
  }
});

t.test('only the libc module loads koffi', async (t) => {
  for (const file of files) {
    if (/['"]koffi['"]/.test(file.text)) t.equal(file.path, 'src/util/libc.ts');
  }
});

t.test('no bare Error outside the catalogue', async (t) => {
  for (const file of files) {
    if (file.path === 'src/util/errors.ts') continue;
    t.notMatch(file.text, /new Error\(/, file.path);
  }
});

// Goal: the rules that the compiler cannot check hold for every source file (STYLE.md §1, §8):
// imports point down the layers and never sideways, only the index store imports lmdb, only
// the libc module loads koffi, and no code outside the error catalogue builds a bare Error. The
// service never imports the benchmark (bench/, a client of the public port); the binaries reach
// it only through bench/run.js. `lightwell serve` and each service process load only their own
// code: the supervisor no LMDB, uWebSockets.js or role module, a child only its own role's.
// Method: read src/**/*.ts and bin/*.ts as text and check each import and each `new Error(`.
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
// The layers, lowest first (docs/architecture.md, "Layers"). The transports of the public port
// (native JSON, S3, the ingest stream) are adapters over the data-plane service; the gateway and
// admin processes mount them; the console is an adapter of the admin process.
const rank: Record<string, number> = {
  util: 0,
  format: 1,
  security: 1,
  engine: 2,
  workers: 3,
  http: 4,
  cluster: 4.5,
  service: 5,
  native: 6,
  s3: 6,
  ingest: 6,
  console: 6,
  gateway: 7,
  admin: 7,
  client: 8,
  cli: 9,
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
    for (const { spec, target } of imports(file)) {
      const [top, targetLayer = ''] = target.split('/');
      if (top !== 'src') continue;
      const ok = targetLayer === layer || (rank[targetLayer] ?? 99) < (rank[layer] ?? -1);
      t.ok(ok, `${file.path} imports ${spec} (${layer} → ${targetLayer})`);
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

/**
 * The modules that loading `start` loads: its static imports that are not type-only, and theirs
 * (a dynamic `import()` loads only when it runs). Answers their paths and the packages they
 * import.
 */
function loadedBy(start: string): { modules: Set<string>; packages: Set<string> } {
  const byPath = new Map(files.map((file) => [file.path, file.text]));
  const modules = new Set<string>();
  const packages = new Set<string>();
  const visit = (path: string): void => {
    if (modules.has(path)) return;
    modules.add(path);
    const text = byPath.get(path) ?? '';
    for (const match of text.matchAll(/^(?:import|export)(\s+type\b)?[^;]*?from '([^']+)'/gm)) {
      if (match[1]) continue;
      const spec = match[2] ?? '';
      if (!spec.startsWith('.')) packages.add(spec);
      else visit(join(path, '..', spec).replace(/\.js$/, '.ts'));
    }
  };
  visit(start);
  return { modules, packages };
}

t.test('serve and each service process load only their own code (memory)', async (t) => {
  // The supervisor never opens the index or a listener: no LMDB, no uWebSockets.js, no role.
  const serve = loadedBy('src/cli/serve.ts');
  t.ok(serve.modules.size > 3, 'the import graph is read');
  for (const name of ['lmdb', 'uWebSockets.js', 'piscina'])
    t.notOk(serve.packages.has(name), `serve does not load ${name}`);
  // A child loads its role's module when it starts; the others never.
  const child = loadedBy('src/cli/child.ts');
  t.ok(child.modules.has('src/util/log.ts'), "child.ts's own imports are followed");
  for (const role of ['src/engine/engine.ts', 'src/gateway/gateway.ts', 'src/admin/admin.ts']) {
    t.notOk(serve.modules.has(role), `serve does not load ${role}`);
    t.notOk(child.modules.has(role), `child.ts does not load ${role} before its role is known`);
  }
});

/**
 * Transport files that still read the index or call engine operations' helpers themselves,
 * until their rules move into the service (docs/architecture.md, "The data-plane service").
 * Empty since S3's last look-ups moved there: it should stay so, and a file on it that no longer
 * needs to be is reported. The native transport is off it for good (see the test after this
 * list's).
 */
const NOT_YET_THROUGH_SERVICE: ReadonlySet<string> = new Set<string>([]);

/** What a transport must not do: read the index (through the store) or use its tables. */
const INDEX_READ = /\bstore\.(get|getShared|peek|has|range|scanRaw)\b|\bDB\.[a-zA-Z]+\b/;

/**
 * How a transport file reaches past the service: its imports of an engine operation module or
 * of the index store, and whether it reads the index itself. Empty when it goes through the
 * service only.
 */
function pastTheService(file: { path: string; text: string }): string[] {
  const direct = imports(file)
    .filter(
      ({ target }) =>
        target.startsWith('src/engine/ops/') || target === 'src/engine/index/store.js',
    )
    .map(({ spec }) => `imports ${spec}`);
  const read = INDEX_READ.exec(file.text);
  return read ? [...direct, `reads the index (${read[0]})`] : direct;
}

t.test('the transport check finds an import past the service and a direct read', async (t) => {
  const probe = (text: string): string[] => pastTheService({ path: 'src/native/x.ts', text });
  t.same(probe("import { a } from '../service/objects.js';\nservice.read(x);"), []);
  t.same(probe("import { findVersionIn } from '../engine/ops/objects.js';"), [
    'imports ../engine/ops/objects.js',
  ]);
  t.same(probe("import type { IndexStore } from '../engine/index/store.js';"), [
    'imports ../engine/index/store.js',
  ]);
  t.same(probe('const v = services.store.range(DB.versions, r);'), [
    'reads the index (store.range)',
  ]);
  t.same(probe('const k = objectKey(DB.objects, 1);'), ['reads the index (DB.objects)']);
});

t.test('transports reach the engine and the index only through the service', async (t) => {
  const transports = ['native', 's3', 'ingest'];
  for (const file of files) {
    if (!transports.includes(file.path.split('/')[1] ?? '')) continue;
    const past = pastTheService(file);
    if (NOT_YET_THROUGH_SERVICE.has(file.path)) {
      t.ok(past.length > 0, `${file.path} is still on the list for a reason`);
      continue;
    }
    t.same(past, [], `${file.path} goes through the service only`);
  }
});

t.test('the native transport is never on the list', async (t) => {
  for (const path of NOT_YET_THROUGH_SERVICE) t.notOk(path.startsWith('src/native/'), path);
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

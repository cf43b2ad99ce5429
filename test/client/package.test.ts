// Goal: `lightwell/client` works as a package's consumers use it (DECISIONS.md: `import {
// LightwellClient } from 'lightwell/client'`, package.json `exports`): it resolves at run time, and
// a strict TypeScript program type-checks against it, with the client's own declarations (a
// missing declaration file is TS7016 under `strict`) and a misuse refused by the types.
// Method: a scratch project whose node_modules/lightwell links to this checkout (its built dist),
// checked with this checkout's TypeScript compiler; then Node imports the same specifier there.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const tsc = join(root, 'node_modules/typescript/bin/tsc');

const GOOD = `import { LightwellClient, LightwellProblem, type ObjectMetadata } from 'lightwell/client';
const client = new LightwellClient({ endpoint: 'http://127.0.0.1:1', token: 'lw_t' });
export async function use(): Promise<ObjectMetadata> {
  const stream = client.ingest('logs');
  await stream.close();
  return client.putObject('logs', 'a.txt', 'hello');
}
export const isProblem = (error: unknown): boolean => error instanceof LightwellProblem;
`;
const BAD = `import { LightwellClient } from 'lightwell/client';
new LightwellClient({ endpoint: 'http://127.0.0.1:1' });
`;
const TSCONFIG = {
  compilerOptions: {
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    strict: true,
    noEmit: true,
    types: [],
    skipLibCheck: false,
  },
};

function scratchProject(t: { teardown(fn: () => void): void }, source: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'lw-client-pkg-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(root, join(dir, 'node_modules/lightwell'), 'dir');
  // @types/node from this checkout, for the client's Buffer and Headers.
  mkdirSync(join(dir, 'node_modules/@types'));
  symlinkSync(join(root, 'node_modules/@types/node'), join(dir, 'node_modules/@types/node'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      ...TSCONFIG,
      compilerOptions: { ...TSCONFIG.compilerOptions, types: ['node'] },
    }),
  );
  writeFileSync(join(dir, 'consumer.ts'), source);
  return dir;
}

async function typeCheck(dir: string): Promise<{ code: number; output: string }> {
  try {
    await run(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { cwd: dir });
    return { code: 0, output: '' };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

t.test('a strict TypeScript consumer type-checks against lightwell/client', async (t) => {
  const checked = await typeCheck(scratchProject(t, GOOD));
  t.equal(checked.code, 0, `tsc accepts the consumer:\n${checked.output}`);
});

t.test('the declarations refuse a misuse (options without credentials)', async (t) => {
  const checked = await typeCheck(scratchProject(t, BAD));
  t.not(checked.code, 0, 'tsc refuses the consumer');
  t.match(checked.output, /consumer\.ts\(2,/, 'the error is at the constructor call');
  t.notMatch(checked.output, /TS7016/, 'not for want of a declaration file');
});

t.test('the package specifier resolves at run time', async (t) => {
  const dir = scratchProject(t, GOOD);
  const script = `import('lightwell/client').then((m) => console.log(typeof m.LightwellClient))`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
    cwd: dir,
  });
  t.equal(stdout.trim(), 'function');
});

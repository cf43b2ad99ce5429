#!/usr/bin/env node
// Builds Lightwell's native code with the machine's C compiler ($CC, else cc): the library
// (native/*.c) into dist/native/liblightwell.so, and the benchmark's load generator
// (bench/native/loadgen.c) into dist/bench/native/lightwell-loadgen. Part of `npm run build`, so
// `npm ci` (through `prepare`), `npm start` and `npm test` build them. Each is skipped when it
// is newer than every one of its sources.
//
// Both are accelerators, never requirements: without a compiler, or where one fails, this
// prints a warning and exits 0; Lightwell then runs with @node-rs/crc32 (src/util/crc32c.ts
// says which it uses) and the benchmark with its Node client (bench/native-load.ts). Set
// LIGHTWELL_NATIVE_REQUIRED=1 to make a failed build fail instead. `--out FILE` builds only the
// library, there; `--loadgen-out FILE` only the load generator (tests do both).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: { out: { type: 'string' }, 'loadgen-out': { type: 'string' } },
});
const sourceDir = join(root, 'native');
const library = {
  output: values.out ?? join(root, 'dist', 'native', 'liblightwell.so'),
  sources: readdirSync(sourceDir)
    .filter((name) => name.endsWith('.c'))
    .map((name) => join(sourceDir, name)),
  flags: ['-O2', '-fPIC', '-shared', '-fvisibility=default'],
  missing: 'native library not built',
  fallback: 'CRC32C uses @node-rs/crc32',
};
const loadgen = {
  output: values['loadgen-out'] ?? join(root, 'dist', 'bench', 'native', 'lightwell-loadgen'),
  sources: [join(root, 'bench', 'native', 'loadgen.c')],
  flags: ['-O2', '-std=gnu11', '-Wall', '-Wextra'],
  missing: 'native load generator not built',
  fallback: 'the benchmark uses its Node client',
};
const targets = [];
if (values.out !== undefined || values['loadgen-out'] === undefined) targets.push(library);
if (values['loadgen-out'] !== undefined || values.out === undefined) targets.push(loadgen);

function modified(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

function giveUp(target, reason) {
  const message = `lightwell: ${target.missing} (${reason}); ${target.fallback}`;
  if (process.env.LIGHTWELL_NATIVE_REQUIRED === '1') {
    console.error(`${message}, and LIGHTWELL_NATIVE_REQUIRED=1`);
    process.exitCode = 1;
  } else console.warn(message);
}

function build(target) {
  const built = modified(target.output);
  const newest = Math.max(...target.sources.map((source) => modified(source) ?? Infinity));
  if (process.platform !== 'linux') {
    giveUp(target, `built on Linux only, this is ${process.platform}`);
    return;
  }
  if (built !== undefined && built >= newest) return;
  mkdirSync(dirname(target.output), { recursive: true });
  const compiler = process.env.CC || 'cc';
  const args = [...target.flags, '-o', target.output, ...target.sources];
  const result = spawnSync(compiler, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.error) giveUp(target, `${compiler}: ${result.error.message}`);
  else if (result.status !== 0) giveUp(target, `${compiler} exited with ${result.status}`);
}

for (const target of targets) build(target);

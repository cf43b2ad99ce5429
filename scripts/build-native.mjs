#!/usr/bin/env node
// Builds Lightwell's native library (native/*.c) into dist/native/liblightwell.so with the
// machine's C compiler ($CC, else cc). Part of `npm run build`, so `npm ci` (through `prepare`),
// `npm start` and `npm test` build it. It skips the compiler when the library is newer than
// every source.
//
// The library is an accelerator, never a requirement: without a compiler, or where it fails,
// this prints a warning and exits 0, and Lightwell runs with @node-rs/crc32 (src/util/crc32c.ts
// says which it uses). Set LIGHTWELL_NATIVE_REQUIRED=1 to make a failed build fail instead.
// `--out FILE` builds elsewhere (tests do).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const sourceDir = join(root, 'native');
const { values } = parseArgs({ options: { out: { type: 'string' } } });
const output = values.out ?? join(root, 'dist', 'native', 'liblightwell.so');
const sources = readdirSync(sourceDir)
  .filter((name) => name.endsWith('.c'))
  .map((name) => join(sourceDir, name));

function modified(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

function giveUp(reason) {
  const message = `lightwell: native library not built (${reason}); CRC32C uses @node-rs/crc32`;
  if (process.env.LIGHTWELL_NATIVE_REQUIRED === '1') {
    console.error(`${message}, and LIGHTWELL_NATIVE_REQUIRED=1`);
    process.exitCode = 1;
  } else console.warn(message);
}

const built = modified(output);
const newest = Math.max(...sources.map((source) => modified(source) ?? Infinity));
if (process.platform !== 'linux') {
  giveUp(`built on Linux only, this is ${process.platform}`);
} else if (built === undefined || built < newest) {
  mkdirSync(dirname(output), { recursive: true });
  const compiler = process.env.CC || 'cc';
  const args = ['-O2', '-fPIC', '-shared', '-fvisibility=default', '-o', output, ...sources];
  const result = spawnSync(compiler, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.error) giveUp(`${compiler}: ${result.error.message}`);
  else if (result.status !== 0) giveUp(`${compiler} exited with ${result.status}`);
}

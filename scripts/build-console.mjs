// Builds the HTML admin console (src/console/web/) into dist/console-web/: type-checks it,
// bundles it with esbuild into one script and one style sheet named by their content hashes,
// and writes the page that loads them (no inline script or style, so the page's strict
// Content-Security-Policy holds) and a manifest the admin process reads when it starts.
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'src/console/web');
const out = join(root, 'dist/console-web');

execFileSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(source, 'tsconfig.json')],
  { stdio: 'inherit' },
);
await rm(out, { recursive: true, force: true });
await mkdir(join(out, 'assets'), { recursive: true });
const result = await build({
  entryPoints: { console: join(source, 'main.tsx') },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  legalComments: 'linked',
  logLevel: 'warning',
});
const files = Object.keys(result.metafile.outputs).map((path) => basename(path));
const script = files.find((name) => name.endsWith('.js'));
const style = files.find((name) => name.endsWith('.css'));
if (!script || !style) throw new TypeError(`the console build wrote ${files.join(', ')}`);
const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Lightwell console</title>
<link rel="stylesheet" href="assets/${style}">
<script type="module" src="assets/${script}"></script>
</head>
<body>
<noscript>The Lightwell console needs JavaScript.</noscript>
<div id="app"></div>
</body>
</html>
`;
await writeFile(join(out, 'index.html'), page);
await writeFile(join(out, 'manifest.json'), JSON.stringify({ files }, null, 2) + '\n');

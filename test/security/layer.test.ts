// Goal: the security layer stays pure: its modules import only node built-ins, `src/util/`
// and each other, and never construct a bare Error (errors come from the catalogue).
// Method: read the compiled modules next to this test (dist/src/security) and inspect every
// import specifier and every `new Error(`.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const securityDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'security');
const modules = readdirSync(securityDir).filter((name) => name.endsWith('.js'));

t.test('every security module is checked', async (t) => {
  const expected = [
    'access-keys.js',
    'expiry.js',
    'keys.js',
    'names.js',
    'native-token.js',
    'rate-limit.js',
    'scopes.js',
  ];
  for (const name of expected) t.ok(modules.includes(name), name);
});

t.test('imports point only down to util or to node built-ins', async (t) => {
  for (const name of modules) {
    const source = readFileSync(join(securityDir, name), 'utf8');
    const imports = source.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g);
    const specifiers = [...imports].map((match) => match[1] ?? '');
    for (const specifier of specifiers) {
      const allowed =
        specifier.startsWith('node:') ||
        specifier.startsWith('../util/') ||
        /^\.\/[a-z-]+\.js$/.test(specifier);
      t.ok(allowed, `${name} imports ${specifier}`);
    }
  }
});

t.test('no bare Error is constructed', async (t) => {
  for (const name of modules) {
    const source = readFileSync(join(securityDir, name), 'utf8');
    t.notOk(/new Error\(/.test(source), name);
  }
});

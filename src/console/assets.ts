// The console's static front end (/admin/console/): the page and its content-hashed script and
// style sheet, built by scripts/build-console.mjs into dist/console-web/. They are read once,
// when the admin process starts, and served from memory: a few hundred KiB, never a path built
// from the request, so no request can reach another file.
//
// The page runs under a strict Content-Security-Policy: scripts, styles and requests from this
// origin only, no inline script or style, no frames, no forms posting elsewhere. It holds the
// admin token in page memory and sends it as a bearer header; the listener sets no cookie.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import type { Exchange } from '../http/exchange.js';
import { NotFound, Unavailable } from '../util/errors.js';

export const CONSOLE_PREFIX = '/admin/console';

/** Where the build writes the front end, from dist/src/console/. */
const BUILT_DIR = fileURLToPath(new URL('../../console-web/', import.meta.url));

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const pageHeaders = {
  'Content-Security-Policy': CONTENT_SECURITY_POLICY,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
} as const;

interface Asset {
  readonly body: Buffer;
  readonly type: string;
}

/** What the build wrote: the page and its hashed assets, by file name. */
export interface ConsoleBundle {
  readonly page: Buffer;
  readonly assets: ReadonlyMap<string, Asset>;
}

const TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
};

/** Loads the built front end; undefined when it was not built (the routes then answer 503). */
export async function loadConsoleBundle(dir = BUILT_DIR): Promise<ConsoleBundle | undefined> {
  let manifest: { files: string[] };
  try {
    manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as {
      files: string[];
    };
  } catch {
    return undefined;
  }
  const assets = new Map<string, Asset>();
  for (const name of manifest.files) {
    const type = TYPES[name.slice(name.lastIndexOf('.'))] ?? 'application/octet-stream';
    assets.set(name, { body: await readFile(join(dir, 'assets', name)), type });
  }
  return { page: await readFile(join(dir, 'index.html')), assets };
}

function sendPage(exchange: Exchange, bundle: ConsoleBundle | undefined): void {
  if (!bundle) throw Unavailable('the console was not built (run npm run build)');
  exchange.send(
    200,
    { ...pageHeaders, 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' },
    bundle.page,
  );
}

/** The page, at /admin/console/ (and /admin/console, which redirects there), and its assets. */
export function consoleAssetRoutes(bundle: ConsoleBundle | undefined): Route<Handler>[] {
  const html = { description: 'the console page', contentType: 'text/html' };
  return [
    {
      method: 'GET',
      path: '',
      operationId: 'consoleRedirect',
      doc: { summary: 'Redirect to the console page', auth: 'none', responses: { 308: html } },
      handler: (exchange) =>
        exchange.send(308, { Location: `${CONSOLE_PREFIX}/`, ...pageHeaders }, ''),
    },
    {
      method: 'GET',
      path: '/',
      operationId: 'consolePage',
      doc: { summary: 'The console page', auth: 'none', responses: { 200: html } },
      handler: (exchange) => sendPage(exchange, bundle),
    },
    {
      method: 'GET',
      path: '/assets/{file}',
      operationId: 'consoleAsset',
      doc: {
        summary: 'A content-hashed script or style sheet of the console',
        auth: 'none',
        responses: { 200: { description: 'the asset', contentType: 'text/javascript' } },
      },
      handler: (exchange, params) => {
        const asset = bundle?.assets.get(params['file'] ?? '');
        if (!asset) throw NotFound(`no console asset ${params['file'] ?? ''}`);
        exchange.send(
          200,
          {
            ...pageHeaders,
            'Content-Type': asset.type,
            // The name carries the content's hash: it never changes under this name.
            'Cache-Control': 'public, max-age=31536000, immutable',
          },
          asset.body,
        );
      },
    },
  ];
}

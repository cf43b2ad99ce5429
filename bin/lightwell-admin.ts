#!/usr/bin/env node
// lightwell-admin: runs the admin process on its own (see `lightwell serve` for all at once).
// uWebSockets.js reads its header limit when it loads: 16 KiB fits the API's own limits (a
// 1024-byte key, 2 KiB of metadata, tokens and checksum headers).
process.env['UWS_HTTP_MAX_HEADERS_SIZE'] ??= '16384';
const { runChild } = await import('../src/cli/child.js');

await runChild('admin', process.argv.slice(2), (code) => process.exit(code));

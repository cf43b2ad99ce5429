#!/usr/bin/env node
// lightwell-admin: runs the admin process on its own (see `lightwell serve` for all at once).
// uWebSockets.js reads its header limit when it loads. Lightwell's own is 16 KiB
// (HEADER_BYTES_MAX: room for a 1024-byte key, 2 KiB of metadata, tokens and checksum headers),
// answered with a problem object; uWS's is set above it, and only requests over 64 KiB get
// uWS's own bare 431.
process.env['UWS_HTTP_MAX_HEADERS_SIZE'] ??= '65536';
const { runChild } = await import('../src/cli/child.js');

await runChild('admin', process.argv.slice(2), (code) => process.exit(code));

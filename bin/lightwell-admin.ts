#!/usr/bin/env node
// lightwell-admin: runs the admin process on its own (see `lightwell serve` for all at once).
import { runChild } from '../src/cli/child.js';

await runChild('admin', process.argv.slice(2));

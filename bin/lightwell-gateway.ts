#!/usr/bin/env node
// lightwell-gateway: runs the gateway process on its own (see `lightwell serve` for all at once).
import { runChild } from '../src/cli/child.js';

await runChild('gateway', process.argv.slice(2));

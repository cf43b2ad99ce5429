#!/usr/bin/env node
// lightwell-engine: runs the engine process on its own (see `lightwell serve` for all at once).
import { runChild } from '../src/cli/child.js';

await runChild('engine', process.argv.slice(2), (code) => process.exit(code));

#!/usr/bin/env node
// The test run's counts from tap's per-file results (.tap/test-results/**/*.tap), which tap
// writes for every test file whatever happens to it, rather than from the reporter's closing
// line, which is missing when a file times out or the reporter itself is cut short.
//
// Prints one line per failed test file (its path and its first failures, a time-out included),
// then `counts: total T pass P fail F skip S todo D files N failed-files M` for .ci/run to read.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Parser } from 'tap-parser';

const root = process.argv[2] ?? '.tap/test-results';
const totals = { total: 0, pass: 0, fail: 0, skip: 0, todo: 0, files: 0, failedFiles: 0 };

function* tapFiles(dir) {
  let names;
  try {
    names = readdirSync(dir).sort();
  } catch {
    return;
  }
  for (const name of names) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* tapFiles(path);
    else if (name.endsWith('.tap')) yield path;
  }
}

/**
 * Counts the leaf assertions of `parser` and of its subtests into `counts`, as tap's reporter
 * counts them: a subtest's own closing `ok`/`not ok` line is not an assertion of its own.
 */
function countLeaves(parser, counts) {
  let openChildren = 0;
  parser.on('child', (child) => {
    openChildren += 1;
    countLeaves(child, counts);
  });
  parser.on('assert', (result) => {
    if (openChildren > 0) {
      openChildren -= 1;
      return;
    }
    counts.total += 1;
    if (result.todo) counts.todo += 1;
    else if (result.skip) counts.skip += 1;
    else if (result.ok) counts.pass += 1;
    else {
      counts.fail += 1;
      counts.failures.push(result.fullname || result.name || '(unnamed)');
    }
  });
}

/** One file's TAP: its leaf counts, and its final results (ok, failures, plan). */
function parse(text) {
  const counts = { total: 0, pass: 0, fail: 0, skip: 0, todo: 0, failures: [] };
  let final;
  const parser = new Parser((results) => (final = results));
  countLeaves(parser, counts);
  parser.end(text);
  return final === undefined ? undefined : { ...final, ...counts, final };
}

for (const path of tapFiles(root)) {
  const results = parse(readFileSync(path, 'utf8'));
  const file = relative(root, path).replace(/\.tap$/, '');
  totals.files += 1;
  if (results === undefined) {
    totals.failedFiles += 1;
    console.log(`FAILED ${file}: its TAP could not be read`);
    continue;
  }
  totals.total += results.total;
  totals.pass += results.pass;
  totals.fail += results.fail;
  totals.skip += results.skip;
  totals.todo += results.todo;
  if (results.ok) continue;
  totals.failedFiles += 1;
  const failures = results.failures.length
    ? results.failures
    : results.final.failures.map((failure) => failure.name || failure.tapError);
  const names = failures.slice(0, 3);
  const more = failures.length > 3 ? ` (and ${failures.length - 3} more)` : '';
  const why = names.length
    ? names.join('; ')
    : 'incomplete (no plan or fewer results than planned)';
  console.log(`FAILED ${file}: ${why}${more}`);
}
const { total, pass, fail, skip, todo, files, failedFiles } = totals;
console.log(
  `counts: total ${total} pass ${pass} fail ${fail} skip ${skip} todo ${todo}` +
    ` files ${files} failed-files ${failedFiles}`,
);

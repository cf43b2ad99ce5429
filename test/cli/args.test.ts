// Goal: the shared command-line parser takes exactly what a command declares and refuses the
// rest as a usage error (exit 2), and a failure reads as one line unless it is a bug.
// Method: parseArgs and failureText on hand-written argument lists and errors.
import t from 'tap';
import { readFileSync } from 'node:fs';
import {
  parseArgs,
  failureText,
  isUsageError,
  EXIT_USAGE,
  type CommandSpec,
} from '../../src/cli/args.js';

const admin: CommandSpec = {
  options: new Set(['role']),
  flags: new Set(['json']),
  positional: true,
};

t.test('what a command declares is taken', async (t) => {
  const args = parseArgs(
    ['list', '--json', '--role', 'owner', '--data-dir=/d', '-h', '--gateways', '-1'],
    admin,
  );
  t.same(args.positional, ['list']);
  t.same([...args.flags].sort(), ['help', 'json']);
  t.same(Object.fromEntries(args.options), { role: 'owner', 'data-dir': '/d', gateways: '-1' });
  t.equal(EXIT_USAGE, 2);
});

t.test('anything else is a usage error', async (t) => {
  const refused: Array<[string[], CommandSpec, string]> = [
    [['-d', '/x'], {}, 'unknown option -d'],
    [['-'], {}, 'unknown option -'],
    [['--'], {}, 'unknown option --'],
    [['/x'], {}, 'unexpected argument /x'],
    [['--json'], {}, 'unknown option --json'],
    [['--quick'], admin, 'unknown option --quick'],
    [['--bogus', 'x'], {}, 'unknown option --bogus'],
    [['--bogus=x'], {}, 'unknown option --bogus'],
    [['--json=true'], admin, '--json takes no value'],
    [['--data-dir'], {}, '--data-dir needs a value'],
    [['--role'], admin, '--role needs a value'],
  ];
  for (const [argv, spec, message] of refused) {
    try {
      parseArgs(argv, spec);
      t.fail(`${argv.join(' ')} was taken`);
    } catch (error) {
      t.ok(isUsageError(error), `${argv.join(' ')}: a usage error`);
      t.equal(failureText(error), message);
    }
  }
});

t.test('failures in one line, bugs with their stack', async (t) => {
  let errno: unknown;
  try {
    readFileSync('/nonexistent/lightwell');
  } catch (error) {
    errno = error;
  }
  t.equal(failureText(errno), "ENOENT: no such file or directory, open '/nonexistent/lightwell'");
  // A bare Error here stands for a bug: only src/util/errors.ts builds errors in the service.
  const bug = new TypeError('x is undefined');
  t.match(failureText(bug), /^TypeError: x is undefined\n\s+at /);
  t.notOk(isUsageError(bug));
});

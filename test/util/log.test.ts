// Goal: the readable log format (a terminal's) shows time, level, where and message in its head
// and every other field after it, and keeps the redaction of the JSON record it is made from.
import t from 'tap';
import { prettyLine } from '../../src/util/log.js';

t.test('a record as one readable line', async (t) => {
  const line = JSON.stringify({
    level: 40,
    time: '2026-12-07T07:20:01.123Z',
    process: 'gateway',
    pid: 7,
    component: 'access',
    msg: 'request',
    status: 200,
    authorization: '[redacted]',
    fields: { a: 1 },
  });
  t.equal(
    prettyLine(line),
    '07:20:01.123 WARN  [gateway/access] request status=200 authorization=[redacted] ' +
      'fields={"a":1}\n',
  );
  t.equal(prettyLine('not json\n'), 'not json\n', 'anything else passes as it is');
});

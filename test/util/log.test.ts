// Goal: the readable log format (a terminal's) shows time, level, where and message in its head
// and every other field after it, and keeps the redaction of the JSON record it is made from;
// the redaction removes credentials and SSE-C keys from logged headers.
import t from 'tap';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { prettyLine, redactPaths } from '../../src/util/log.js';

t.test('secrets in logged headers are redacted', async (t) => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const logger = pino({ redact: { paths: redactPaths, censor: '[redacted]' } }, sink);
  const key = 'cGFzc3dvcmRwYXNzd29yZHBhc3N3b3JkcGFzc3dvcmQ=';
  logger.info({
    headers: {
      authorization: 'AWS4-HMAC-SHA256 Credential=x',
      'x-amz-server-side-encryption-customer-key': key,
      'x-amz-copy-source-server-side-encryption-customer-key': key,
      'x-amz-server-side-encryption-customer-key-md5': 'md5',
    },
  });
  const text = lines.join('');
  t.notOk(text.includes(key), 'no SSE-C key');
  t.notOk(text.includes('Credential'), 'no authorization');
  t.ok(text.includes('"x-amz-server-side-encryption-customer-key-md5":"md5"'), 'the MD5 stays');
});

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

// Goal: webhook targets are checked for server-side request forgery as issue 4 says: loopback,
// link-local, private, shared and other special-purpose addresses (IPv4, IPv6 and IPv4-mapped
// IPv6) count as private, public ones do not; URLs must be http(s) without credentials.
// Method: direct calls on literal addresses and URLs (no name resolution here).
import t from 'tap';
import { isPrivateAddress, parseWebhookUrl, hostOf } from '../../src/security/webhook-target.js';
import { errorCode } from '../../src/util/errors.js';

t.test('private and special-purpose addresses', async (t) => {
  for (const address of [
    '127.0.0.1',
    '127.8.9.10',
    '10.0.0.1',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fd12:3456::1',
    'fc00::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '64:ff9b::a00:1',
    'not an address',
  ]) {
    t.ok(isPrivateAddress(address), address);
  }
  for (const address of [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '172.32.0.1',
    '192.169.0.1',
    '2001:4860:4860::8888',
    '2606:4700::1111',
    '::ffff:8.8.8.8',
  ]) {
    t.notOk(isPrivateAddress(address), address);
  }
});

t.test('URL shape', async (t) => {
  t.equal(hostOf(parseWebhookUrl('http://[::1]:8080/x')), '::1');
  t.equal(hostOf(parseWebhookUrl('https://hooks.example.com/a?b=c')), 'hooks.example.com');
  t.equal(
    hostOf(parseWebhookUrl('http://0x7f.1/')),
    '127.0.0.1',
    'odd IPv4 spellings are normalised before the check',
  );
  for (const url of [
    'ftp://example.com/',
    'http://user:pw@example.com/',
    'not a url',
    '',
    'file:///etc/passwd',
    `http://example.com/${'x'.repeat(3000)}`,
    42,
  ]) {
    t.equal(
      errorCode(
        (() => {
          try {
            parseWebhookUrl(url);
            return undefined;
          } catch (error) {
            return error;
          }
        })(),
      ),
      'bad_request',
      String(url).slice(0, 30),
    );
  }
});

// Goal: webhook targets are checked for server-side request forgery as issue 4 says: loopback,
// link-local, private, shared and other special-purpose addresses (IPv4, IPv6, and IPv6 that
// carries a refused IPv4 address) count as private, public ones do not; URLs must be http(s)
// without credentials.
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
    // IPv6 spellings that carry a refused IPv4 address: IPv4-compatible (::/96, refused whole),
    // IPv4-translated, 6to4 (bits 16-47), Teredo (2001::/32, refused whole).
    '::127.0.0.1',
    '::7f00:1',
    '::8.8.8.8',
    '::ffff:0:7f00:1',
    '::ffff:0:10.0.0.1',
    '::ffff:0:169.254.169.254',
    '2002:7f00:1::',
    '2002:a00:1::',
    '2002:a9fe:a9fe::1',
    '2002:c0a8:101:1::1',
    '2001:0:4136:e378:8000:63bf:80ff:fffe',
    '2001::80ff:fffe',
    '0:0:0:0:0:0:0:1',
    'fe80::1%eth0',
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
    '::ffff:0:8.8.8.8',
    '2002:808:808::1',
    '2002:5db8:d822:1:2:3:4:5',
    '2003:7f00:1::',
  ]) {
    t.notOk(isPrivateAddress(address), address);
  }
});

t.test('URL shape', async (t) => {
  t.equal(hostOf(parseWebhookUrl('http://[::1]:8080/x')), '::1');
  t.equal(hostOf(parseWebhookUrl('https://hooks.example.com/a?b=c')), 'hooks.example.com');
  for (const url of [
    'http://[::127.0.0.1]/',
    'http://[::ffff:0:7f00:1]/',
    'http://[2002:7f00:1::]/',
    'http://[2002:a00:1::]/',
  ])
    t.ok(isPrivateAddress(hostOf(parseWebhookUrl(url))), `${url}: as the URL spells it`);
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

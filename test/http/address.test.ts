// Goal: a peer's address is canonical whatever listener it came through: uWebSockets.js gives
// an IPv6 listener's peers in full hex, which must read as the dotted IPv4 of an IPv4-mapped
// address (127.0.0.1, so that loopback token minting works on a `::` listener and a trusted
// proxy written as IPv4 matches) and as the compressed form of any other IPv6 address; IPv4
// text and anything unparsable are left as they are.
// Method: the forms uWebSockets.js produces (seen on a `::` listener: 127.0.0.1 arrives as
// 0000:0000:0000:0000:0000:ffff:7f00:0001, ::1 as eight groups) through canonicalAddress.
import t from 'tap';
import { canonicalAddress } from '../../src/http/exchange.js';

t.test('uWebSockets.js address forms become canonical', async (t) => {
  const cases: Array<[string, string]> = [
    ['127.0.0.1', '127.0.0.1'],
    ['10.1.2.3', '10.1.2.3'],
    ['0000:0000:0000:0000:0000:ffff:7f00:0001', '127.0.0.1'],
    ['0000:0000:0000:0000:0000:ffff:0a00:0005', '10.0.0.5'],
    ['0000:0000:0000:0000:0000:ffff:c0a8:01fe', '192.168.1.254'],
    ['0000:0000:0000:0000:0000:0000:0000:0001', '::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['FE80:0000:0000:0000:0202:B3FF:FE1E:8329', 'fe80::202:b3ff:fe1e:8329'],
    ['', ''],
    ['not:an:address', 'not:an:address'],
  ];
  for (const [given, canonical] of cases) t.equal(canonicalAddress(given), canonical, given);
});

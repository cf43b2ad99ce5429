// Webhook targets and server-side request forgery: which URLs a notification config may name,
// and which addresses a delivery may connect to. Pure: resolving names is the engine's job.
//
// Invariants:
// - A target is an absolute http or https URL without credentials, at most
//   WEBHOOK_URL_CHARS_MAX characters.
// - `isPrivateAddress` is true for loopback, link-local, private, shared (CGNAT), multicast,
//   reserved and other special-purpose addresses. The engine (src/engine/delivery.ts) uses it
//   when a config is stored (every address the host resolves to) and again at every connection,
//   so a name that later resolves elsewhere (DNS rebinding) is still refused, unless
//   `notifications.allow_private_targets` is set.
// - IPv6 addresses that carry an IPv4 address are judged as that address: IPv4-mapped
//   (::ffff:0:0/96; node's BlockList does this), IPv4-translated (::ffff:0:0:0/96) and 6to4
//   (2002::/16, the IPv4 address in bits 16-47). IPv4-compatible (::/96, deprecated; with the
//   unspecified and loopback addresses), NAT64 and Teredo (2001::/32, inside 2001::/23) addresses
//   are refused whole.
//
// Persists: nothing.

import assert from 'node:assert/strict';
import { BlockList, isIP } from 'node:net';
import { BadRequest } from '../util/errors.js';

export const WEBHOOK_URL_CHARS_MAX = 2048;

const special = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  special.addSubnet(network, prefix, 'ipv4');
for (const [network, prefix] of [
  ['::', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  special.addSubnet(network, prefix, 'ipv6');

/** True for an address a webhook may not reach unless private targets are allowed. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  if (family === 4) return special.check(address, 'ipv4');
  if (special.check(address, 'ipv6')) return true;
  const carried = carriedIpv4(ipv6Bytes(address));
  return carried !== undefined && special.check(carried, 'ipv4');
}

/**
 * The IPv4 address that a translator or relay would deliver to, for the IPv6 forms that carry
 * one and are not refused whole: IPv4-translated (::ffff:0:a.b.c.d) and 6to4 (2002:AABB:CCDD::).
 */
function carriedIpv4(bytes: Buffer): string | undefined {
  const translated =
    bytes.subarray(0, 8).every((byte) => byte === 0) &&
    bytes.readUInt16BE(8) === 0xffff &&
    bytes.readUInt16BE(10) === 0;
  if (translated) return [...bytes.subarray(12, 16)].join('.');
  if (bytes.readUInt16BE(0) === 0x2002) return [...bytes.subarray(2, 6)].join('.');
  return undefined;
}

/** The 16 bytes of an address that `isIP` found to be IPv6 (a zone id is dropped). */
function ipv6Bytes(address: string): Buffer {
  let text = address.replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    const words = [(a << 8) | b, (c << 8) | d].map((word) => word.toString(16));
    text = `${text.slice(0, dotted.index)}${words.join(':')}`;
  }
  const [head = '', tail] = text.split('::');
  const wordsOf = (part: string): number[] =>
    part === '' ? [] : part.split(':').map((word) => parseInt(word, 16));
  const headWords = wordsOf(head);
  const tailWords = tail === undefined ? [] : wordsOf(tail);
  const zeros = tail === undefined ? 0 : 8 - headWords.length - tailWords.length;
  const words = [...headWords, ...new Array<number>(zeros).fill(0), ...tailWords];
  assert.equal(words.length, 8, `not an IPv6 address: ${address}`);
  const bytes = Buffer.alloc(16);
  words.forEach((word, index) => bytes.writeUInt16BE(word, index * 2));
  return bytes;
}

/** Parses and checks the shape of a webhook URL; `bad_request` names what is wrong. */
export function parseWebhookUrl(value: unknown): URL {
  if (typeof value !== 'string' || value.length === 0 || value.length > WEBHOOK_URL_CHARS_MAX) {
    throw BadRequest(
      `url must be an absolute http(s) URL of at most ${WEBHOOK_URL_CHARS_MAX} characters`,
    );
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw BadRequest('url is not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw BadRequest('url must use http or https');
  if (url.username !== '' || url.password !== '')
    throw BadRequest('url must not carry credentials');
  if (url.hostname === '') throw BadRequest('url needs a host');
  return url;
}

/** The host of a URL as a resolver or an address check wants it (no IPv6 brackets). */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

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
// - IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry (node's BlockList
//   does this); NAT64 addresses are refused whole.
//
// Persists: nothing.

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
  ['::', 128],
  ['::1', 128],
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
  return special.check(address, family === 4 ? 'ipv4' : 'ipv6');
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

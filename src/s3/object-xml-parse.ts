// The S3 XML request bodies of the object operations: Delete (DeleteObjects) and
// CompleteMultipartUpload, read with fast-xml-parser under limits.
//
// Invariants:
// - A body is refused before parsing when it is larger than its operation's limit or nests
//   deeper than `XML_DEPTH_MAX`; a document type declaration is refused outright (no entity
//   can be declared, so none can expand).
// - Text is kept exactly: no trimming of keys (S3 keys may start or end with spaces), no
//   number conversion (`0001` stays a string); the predefined entities and character
//   references are decoded, nothing else (no entity can be declared).
// - Every refusal is an S3 error (errors.ts): `MaxMessageLengthExceeded`, `MalformedXML`,
//   `InvalidArgument`, `InvalidPartOrder`.
//
// Nothing here is persisted.

import { XMLParser, XMLValidator } from 'fast-xml-parser';
import type { LightwellError } from '../util/errors.js';
import { s3Error } from './errors.js';

/** Deepest element nesting accepted in a request body (S3's bodies need 4). */
export const XML_DEPTH_MAX = 16;
/** DeleteObjects: at most 1,000 keys (S3's limit); the body at most 2 MiB. */
export const DELETE_KEYS_MAX = 1000;
export const DELETE_BODY_BYTES_MAX = 2 * 1024 * 1024;
/** CompleteMultipartUpload: at most 10,000 parts; the body at most 4 MiB. */
export const COMPLETE_PARTS_MAX = 10_000;
export const COMPLETE_BODY_BYTES_MAX = 4 * 1024 * 1024;

function malformed(message: string): LightwellError {
  return s3Error('MalformedXML', message);
}

const parser = new XMLParser({
  ignoreAttributes: true,
  removeNSPrefix: true,
  parseTagValue: false,
  trimValues: false,
  // Entities are decoded by `decodeText`, which knows only XML's own: fast-xml-parser leaves
  // character references as they are.
  processEntities: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
  maxNestedTags: XML_DEPTH_MAX,
  // Lists are always arrays, even of one, so a single Object or Part reads like many.
  isArray: (name) => name === 'Object' || name === 'Part',
});

/**
 * Parses `body` as one XML document whose root element is `root`, within `bytesMax`; returns
 * the root's children as fast-xml-parser gives them.
 */
function parseDocument(body: Buffer, root: string, bytesMax: number): Record<string, unknown> {
  if (body.length > bytesMax) {
    throw s3Error(
      'MaxMessageLengthExceeded',
      `the ${root} document is larger than ${bytesMax} bytes`,
    );
  }
  const text = body.toString('utf8');
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw malformed('a document type declaration is refused');
  checkDepth(text);
  // The parser alone accepts unclosed and mismatched tags; its validator is what refuses them
  // (deprecated for a separate package of the same author, not a dependency of Lightwell).
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  if (XMLValidator.validate(text) !== true) throw malformed(`the ${root} document is not XML`);
  let parsed: unknown;
  try {
    parsed = parser.parse(text);
  } catch {
    throw malformed(`the ${root} document is not XML`);
  }
  const top = (parsed ?? {}) as Record<string, unknown>;
  const names = Object.keys(top).filter((name) => name !== '#text');
  if (names.length !== 1 || names[0] !== root) throw malformed(`the root element must be ${root}`);
  const children = top[root];
  if (children === '' || children === undefined) return {};
  if (typeof children !== 'object' || children === null || Array.isArray(children))
    throw malformed(`${root} must hold elements`);
  return children as Record<string, unknown>;
}

/** Refuses nesting deeper than XML_DEPTH_MAX before the parser sees the text. */
function checkDepth(text: string): void {
  let depth = 0;
  for (let at = text.indexOf('<'); at !== -1; at = text.indexOf('<', at + 1)) {
    const next = text.charCodeAt(at + 1);
    if (next === 0x2f /* / */) depth--;
    else if (next !== 0x3f /* ? */ && next !== 0x21 /* ! */) {
      const end = text.indexOf('>', at);
      if (end === -1) throw malformed('an element is not closed');
      if (text.charCodeAt(end - 1) !== 0x2f) depth++;
      if (depth > XML_DEPTH_MAX) throw malformed(`elements nest deeper than ${XML_DEPTH_MAX}`);
    }
  }
}

/** The text of a leaf element, or undefined when absent; an element with children is refused. */
function leaf(node: Record<string, unknown>, name: string): string | undefined {
  const value = node[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw malformed(`${name} appears more than once`);
  if (typeof value !== 'string') throw malformed(`${name} must hold text`);
  return decodeText(value);
}

const PREDEFINED: ReadonlyMap<string, string> = new Map([
  ['amp', '&'],
  ['lt', '<'],
  ['gt', '>'],
  ['quot', '"'],
  ['apos', "'"],
]);

/** Decodes XML's predefined entities and character references; any other `&` is refused. */
function decodeText(value: string): string {
  if (!value.includes('&')) return value;
  return value.replace(/&([^;&]{0,10});?/g, (match, name: string) => {
    if (!match.endsWith(';')) throw malformed('a bare & in text');
    const predefined = PREDEFINED.get(name);
    if (predefined !== undefined) return predefined;
    const reference = /^#(?:x([0-9a-fA-F]{1,6})|([0-9]{1,7}))$/.exec(name);
    const code = reference
      ? parseInt(reference[1] ?? reference[2] ?? '', reference[1] ? 16 : 10)
      : NaN;
    if (!(code >= 1 && code <= 0x10ffff) || (code >= 0xd800 && code <= 0xdfff))
      throw malformed(`&${name}; is not an XML entity or character reference`);
    return String.fromCodePoint(code);
  });
}

function list(node: Record<string, unknown>, name: string): Record<string, unknown>[] {
  const value = node[name];
  if (value === undefined) return [];
  const items = Array.isArray(value) ? value : [value];
  return items.map((item) => {
    if (item === '') return {};
    if (typeof item !== 'object' || item === null) throw malformed(`${name} must hold elements`);
    return item as Record<string, unknown>;
  });
}

// ---------------------------------------------------------------------------------------------

export interface DeleteRequest {
  readonly quiet: boolean;
  readonly objects: readonly { key: string; versionId?: string; etag?: string }[];
}

/** The body of DeleteObjects (`POST /{bucket}?delete`). */
export function parseDeleteRequest(body: Buffer): DeleteRequest {
  const root = parseDocument(body, 'Delete', DELETE_BODY_BYTES_MAX);
  const quietText = leaf(root, 'Quiet')?.trim();
  if (quietText !== undefined && quietText !== 'true' && quietText !== 'false')
    throw malformed('Quiet must be true or false');
  const entries = list(root, 'Object');
  if (entries.length === 0) throw malformed('Delete must name at least one Object');
  if (entries.length > DELETE_KEYS_MAX)
    throw malformed(`Delete names at most ${DELETE_KEYS_MAX} objects`);
  const objects = entries.map((entry) => {
    const key = leaf(entry, 'Key');
    if (key === undefined || key === '') throw malformed('every Object needs a Key');
    const versionId = leaf(entry, 'VersionId');
    const etag = leaf(entry, 'ETag');
    return {
      key,
      ...(versionId === undefined ? {} : { versionId }),
      ...(etag === undefined ? {} : { etag }),
    };
  });
  return { quiet: quietText === 'true', objects };
}

export interface CompletePartEntry {
  readonly partNumber: number;
  readonly etag: string;
  /** The part checksums the client listed, by algorithm name (`CRC32`, ...). */
  readonly checksums: Readonly<Record<string, string>>;
}

const PART_CHECKSUM_ELEMENTS: readonly (readonly [string, string])[] = [
  ['ChecksumCRC32', 'CRC32'],
  ['ChecksumCRC32C', 'CRC32C'],
  ['ChecksumCRC64NVME', 'CRC64NVME'],
  ['ChecksumSHA1', 'SHA1'],
  ['ChecksumSHA256', 'SHA256'],
];

/**
 * The body of CompleteMultipartUpload. Checks the list's own shape (numbers 1..10,000 in
 * strictly ascending order: else `InvalidPartOrder`); whether the parts exist, match and are
 * large enough is the service's to check against what was uploaded.
 */
export function parseCompleteRequest(body: Buffer): CompletePartEntry[] {
  const root = parseDocument(body, 'CompleteMultipartUpload', COMPLETE_BODY_BYTES_MAX);
  const entries = list(root, 'Part');
  if (entries.length === 0) throw malformed('CompleteMultipartUpload must list at least one Part');
  if (entries.length > COMPLETE_PARTS_MAX)
    throw malformed(`CompleteMultipartUpload lists at most ${COMPLETE_PARTS_MAX} parts`);
  let previous = 0;
  return entries.map((entry) => {
    const numberText = leaf(entry, 'PartNumber')?.trim();
    const etag = leaf(entry, 'ETag')?.trim();
    if (numberText === undefined || etag === undefined)
      throw malformed('every Part needs a PartNumber and an ETag');
    const partNumber = /^[0-9]{1,5}$/.test(numberText) ? Number(numberText) : NaN;
    if (!(partNumber >= 1 && partNumber <= COMPLETE_PARTS_MAX)) {
      throw s3Error('InvalidArgument', `part numbers run from 1 to ${COMPLETE_PARTS_MAX}`);
    }
    if (partNumber <= previous) {
      throw s3Error('InvalidPartOrder', 'the list of parts was not in ascending order');
    }
    previous = partNumber;
    const checksums: Record<string, string> = {};
    for (const [element, alg] of PART_CHECKSUM_ELEMENTS) {
      const value = leaf(entry, element)?.trim();
      if (value !== undefined) checksums[alg] = value;
    }
    return { partNumber, etag, checksums };
  });
}

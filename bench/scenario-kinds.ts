// The scenarios that are more than one PUT or GET load: a multipart upload in parallel parts,
// listing a large bucket page by page, and a mixed GET/PUT load.
//
// Multipart skips itself with "not available" when creating an upload answers 404, 405 or 501
// (the routes come in a later issue). Listing populates its own bucket, unmeasured, with many
// concurrent PUTs of 0..64-byte objects named `o/00000000`, `o/00000001`, ..., so the expected
// listing order is the index order; the timed part follows continuation tokens one page at a time
// and checks every key. The mixed load reads the 1 MiB dataset and writes new 1 MiB objects.

import { BenchError } from './bench-error.js';
import { type BodyPlan, type Checksums, planChecksums } from './data.js';
import { jsonRequest, type ResponseResult } from './http1.js';
import { type LoadRequest, runLoad } from './load.js';
import {
  type Dataset,
  emptyMeasured,
  encodeKey,
  ensureBucket,
  ensureDataset,
  getRequest,
  loadWithProgress,
  mainBucket,
  type Measured,
  measuredFromLoad,
  objectPath,
  OCTET_STREAM,
  parseJson,
  putRequest,
  type Scenario,
  type ScenarioContext,
  timed,
  verifyDataset,
} from './scenario-kit.js';

const LIST_PAGE_KEYS = 1000;

// ---------------------------------------------------------------------------------------------
// Multipart

interface Upload {
  readonly bucket: string;
  readonly key: string;
  readonly uploadId: string;
  readonly auth: string;
}

function multipartPath(bucket: string, rest: string): string {
  return `/api/v1/buckets/${encodeURIComponent(bucket)}/multipart/${rest}`;
}

/** Creates an upload; null when the service has no multipart routes yet. */
async function createUpload(
  context: ScenarioContext,
  bucket: string,
  key: string,
  auth: string,
): Promise<Upload | null> {
  const response = await jsonRequest(context.service.target, {
    method: 'POST',
    path: multipartPath(bucket, encodeKey(key)),
    headers: auth,
  });
  if ([404, 405, 501].includes(response.status)) return null;
  const uploadId = (response.json as { uploadId?: unknown } | null)?.uploadId;
  if (response.status !== 201 || typeof uploadId !== 'string') {
    const text = response.text.slice(0, 300);
    throw new BenchError(`create multipart upload: HTTP ${response.status} ${text}`);
  }
  return { bucket, key, uploadId, auth };
}

function partRequest(
  upload: Upload,
  plan: BodyPlan,
  partNumber: number,
  etags: string[],
): LoadRequest {
  const id = encodeURIComponent(upload.uploadId);
  const rest = `${id}/parts/${partNumber}/${encodeKey(upload.key)}`;
  return {
    method: 'PUT',
    path: multipartPath(upload.bucket, rest),
    headers: `${upload.auth}${OCTET_STREAM}`,
    body: plan,
    collect: true,
    check: (response: ResponseResult) => {
      const part = parseJson(response.body) as { etag?: unknown; partNumber?: unknown } | null;
      if (typeof part?.etag !== 'string') return 'part answer has no etag';
      if (part.partNumber !== undefined && part.partNumber !== partNumber) {
        return `part answer is for part ${JSON.stringify(part.partNumber)}`;
      }
      etags[partNumber - 1] = part.etag;
      return null;
    },
  };
}

async function completeUpload(
  context: ScenarioContext,
  upload: Upload,
  etags: readonly string[],
): Promise<void> {
  const rest = `${encodeURIComponent(upload.uploadId)}/complete/${encodeKey(upload.key)}`;
  const response = await jsonRequest(context.service.target, {
    method: 'POST',
    path: multipartPath(upload.bucket, rest),
    headers: upload.auth,
    json: { parts: etags.map((etag, i) => ({ partNumber: i + 1, etag })) },
  });
  if (response.status !== 200) {
    const text = response.text.slice(0, 300);
    throw new BenchError(`complete multipart upload: HTTP ${response.status} ${text}`);
  }
}

/** Reads the assembled object back and checks its length and CRC32 (untimed). */
async function verifyAssembled(
  context: ScenarioContext,
  upload: Upload,
  plans: readonly BodyPlan[],
): Promise<string[]> {
  let sum: Checksums = { crc32: 0, crc32c: 0 };
  for (const plan of plans) sum = planChecksums(plan, context.scratch, sum);
  const length = plans.reduce((total, plan) => total + plan.length, 0);
  const result = await runLoad({
    target: context.service.target,
    client: context.client,
    connections: 1,
    requests: 1,
    makeRequest: () => ({
      method: 'GET',
      path: objectPath(upload.bucket, upload.key),
      headers: upload.auth,
      expectBytes: length,
      expectCrc32: sum.crc32,
    }),
  });
  return [...result.failureSamples];
}

export function multipartScenario(
  name: string,
  title: string,
  bounds: readonly string[],
): Scenario {
  return { name, title, bounds, run: (context) => runMultipart(context, name) };
}

/** Creates an upload (untimed), then times 16 parallel part PUTs plus the complete call. */
async function runMultipart(context: ScenarioContext, name: string): Promise<Measured> {
  const { parts, partBytes } = context.sizes;
  const bucket = mainBucket(context);
  await ensureBucket(context, bucket);
  const auth = await context.service.authHeader();
  const upload = await createUpload(context, bucket, `multipart/${name}`, auth);
  if (upload === null) {
    return emptyMeasured({
      skipped: 'multipart not available (creating an upload answered 404/405/501)',
    });
  }
  const template = context.templates.random;
  const plans: BodyPlan[] = [];
  for (let i = 0; i < parts; i++) {
    plans.push({ template, length: partBytes, seed: context.seeds.next() });
  }
  const etags: string[] = [];
  const total = { amount: parts * partBytes, unit: 'bytes' as const };
  const load = await timed(context, async () => {
    const result = await loadWithProgress(context, name, total, {
      connections: parts,
      requests: parts,
      makeRequest: (i) => partRequest(upload, plans[i] as BodyPlan, i + 1, etags),
    });
    if (result.failures === 0) await completeUpload(context, upload, etags);
    return result;
  });
  const failures =
    load.value.failures > 0
      ? [...load.value.failureSamples]
      : await verifyAssembled(context, upload, plans);
  return measuredFromLoad(load, {
    unit: 'MB/s',
    objects: 1,
    objectBytes: parts * partBytes,
    concurrency: parts,
    failures,
    notes: [`${parts} parts of ${partBytes} bytes`],
  });
}

// ---------------------------------------------------------------------------------------------
// Listing

export function listKey(index: number): string {
  return `o/${index.toString().padStart(8, '0')}`;
}

/** Writes `count` tiny objects (0..64 bytes) with 64 connections, unmeasured. */
async function populateList(
  context: ScenarioContext,
  bucket: string,
  count: number,
): Promise<void> {
  const headers = `${await context.service.authHeader()}${OCTET_STREAM}`;
  const template = context.templates.text;
  const total = { amount: count, unit: 'ops' as const };
  const result = await loadWithProgress(context, `preparing ${count} keys`, total, {
    connections: 64,
    requests: count,
    makeRequest: (i) => ({
      method: 'PUT',
      path: objectPath(bucket, listKey(i)),
      headers,
      body: { template, length: i % 65, seed: null },
    }),
  });
  if (result.failures > 0) {
    throw new BenchError(`populating the list bucket: ${result.failureSamples.join('; ')}`);
  }
}

interface ListState {
  token: string | null;
  seen: number;
  done: boolean;
}

interface ListPage {
  readonly objects?: unknown;
  readonly isTruncated?: unknown;
  readonly nextContinuationToken?: unknown;
}

/** Checks one page: keys continue the expected sequence; follows the continuation token. */
function checkPage(state: ListState, response: ResponseResult): string | null {
  const page = parseJson(response.body) as ListPage | null;
  const objects = page?.objects;
  if (!Array.isArray(objects)) return failList(state, 'list answered no objects array');
  for (const object of objects as { key?: unknown }[]) {
    const expected = listKey(state.seen);
    if (object.key !== expected) {
      return failList(state, `key #${state.seen} is ${String(object.key)}, expected ${expected}`);
    }
    state.seen += 1;
  }
  if (page?.isTruncated !== true) {
    state.done = true;
    return null;
  }
  const next = page.nextContinuationToken;
  if (typeof next !== 'string' || next === '' || objects.length === 0) {
    return failList(state, 'a truncated page without keys or nextContinuationToken');
  }
  state.token = next;
  return null;
}

function failList(state: ListState, message: string): string {
  state.done = true;
  return message;
}

export function listScenario(name: string, title: string, bounds: readonly string[]): Scenario {
  return { name, title, bounds, run: (context) => runList(context, name) };
}

/** Populates a bucket (untimed), then times listing it one page after the other. */
async function runList(context: ScenarioContext, name: string): Promise<Measured> {
  const count = context.sizes.listKeys;
  const bucket = `${mainBucket(context)}-list`;
  await ensureBucket(context, bucket);
  await populateList(context, bucket, count);
  const auth = await context.service.authHeader();
  const state: ListState = { token: null, seen: 0, done: false };
  const base =
    `/api/v1/buckets/${encodeURIComponent(bucket)}/objects` + `?prefix=&maxKeys=${LIST_PAGE_KEYS}`;
  const pageOf = (token: string | null): string =>
    token === null ? base : `${base}&continuationToken=${encodeURIComponent(token)}`;
  const total = { amount: Math.ceil(count / LIST_PAGE_KEYS), unit: 'ops' as const };
  const load = await timed(context, () =>
    loadWithProgress(context, name, total, {
      connections: 1,
      makeRequest: () =>
        state.done
          ? null
          : {
              method: 'GET',
              path: pageOf(state.token),
              headers: auth,
              collect: true,
              check: (response) => checkPage(state, response),
            },
    }),
  );
  const failures = [...load.value.failureSamples];
  if (failures.length === 0 && state.seen !== count) {
    failures.push(`listed ${state.seen} keys, expected ${count}`);
  }
  const measured = measuredFromLoad(load, {
    unit: 'keys/s',
    objects: count,
    objectBytes: 0,
    concurrency: 1,
    failures,
    notes: [`${load.value.requests} pages of up to ${LIST_PAGE_KEYS} keys`],
  });
  return { ...measured, operations: state.seen };
}

// ---------------------------------------------------------------------------------------------
// Mixed

export function mixedScenario(name: string, title: string, bounds: readonly string[]): Scenario {
  return { name, title, bounds, run: (context) => runMixed(context, name) };
}

/** Request i is a PUT when i % 5 == 4 (20%), else a GET of an existing 1 MiB object. */
async function runMixed(context: ScenarioContext, name: string): Promise<Measured> {
  const source = await ensureDataset(context, 'medium');
  const ops = context.sizes.mixedOps;
  const bytes = context.sizes.mediumBytes;
  const written = mixedPutDataset(context, source.bucket, Math.floor(ops / 5), bytes);
  const auth = await context.service.authHeader();
  const serverCrcs: (string | undefined)[] = [];
  const api = context.api;
  const total = { amount: ops * bytes, unit: 'bytes' as const };
  const load = await timed(context, () =>
    loadWithProgress(context, name, total, {
      connections: 32,
      requests: ops,
      makeRequest: (i) =>
        i % 5 === 4
          ? putRequest(written, Math.floor(i / 5), `${auth}${OCTET_STREAM}`, serverCrcs, api)
          : getRequest(source, (i * 7919) % source.keys.length, auth, api),
    }),
  );
  const failures = [...load.value.failureSamples];
  const notes: string[] = [];
  if (failures.length === 0) {
    const verified = await verifyDataset(context, written, serverCrcs);
    failures.push(...verified.failures);
    notes.push(verified.note);
  }
  return measuredFromLoad(load, {
    unit: 'MB/s',
    objects: ops,
    objectBytes: bytes,
    concurrency: 32,
    failures,
    notes,
  });
}

function mixedPutDataset(
  context: ScenarioContext,
  bucket: string,
  count: number,
  bytes: number,
): Dataset {
  const keys: string[] = [];
  const plans: BodyPlan[] = [];
  for (let i = 0; i < count; i++) {
    keys.push(`mixed/${i.toString().padStart(7, '0')}`);
    plans.push({ template: context.templates.random, length: bytes, seed: context.seeds.next() });
  }
  return { name: 'mixed', bucket, keys, plans, crc32s: [] };
}

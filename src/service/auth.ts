// Authentication and authorization of data-plane requests.
//
// A bearer token is verified statelessly (HMAC under the token key), then its access key is
// looked up on every request, so revoking the key or disabling the tenant takes effect at
// once. Scopes are checked per operation. Tenant data keys are unwrapped once and cached, until
// the tenant's wrapped key changes (a data-key rotation, or a master-key rotation's re-seal).
//
// A master-key rotation (src/engine/master-key-rotation.ts) is seen here by the check value the
// index records, compared on each request: the new key is then read (without blocking the event
// loop; requests meanwhile answer 503 `unavailable`, retryable) and every key derived from it is
// replaced in place, in the very Buffers handed out by `purposeKey`, so a holder of one (the
// list-token signer, the signed-URL routes, the ingest stream) follows without being told.

import { watch, type FSWatcher } from 'node:fs';
import { basename } from 'node:path';

import { readMasterKeySync, type DataDirPaths } from '../engine/data-dir.js';
import {
  masterKeyCheckOf,
  verifyMasterKey,
  type MasterKeyCheckRecord,
} from '../engine/master-key-check.js';
import { readCurrentMasterKey, readCurrentMasterKeySync } from '../engine/master-key-rotation.js';
import type { IndexStore } from '../engine/index/store.js';
import {
  DB,
  META_MASTER_KEY_CHECK,
  tenantKey,
  accessKeyKey,
  type AccessKeyRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import {
  deriveKey,
  unwrapTenantKey,
  dedupKey,
  openSecret,
  PURPOSE_LIST_TOKEN,
  PURPOSE_NATIVE_TOKEN,
  PURPOSE_SECRET_SEAL,
  PURPOSE_SIGNED_URL,
} from '../security/keys.js';
import {
  verifyNativeToken,
  mintNativeToken,
  type MintedNativeToken,
  type NativeTokenPayload,
} from '../security/native-token.js';

const VERIFIED_TOKENS_MAX = 10_000;
/** Access keys whose opened secret is kept (`secretOf`); all are dropped when it is full. */
const OPENED_SECRETS_MAX = 10_000;
import { parseScopes, allows, type Scope, type ScopeRequest } from '../security/scopes.js';
import { constantTimeEqual } from '../security/access-keys.js';
import { Unauthorized, Forbidden, Unavailable, isLightwellError } from '../util/errors.js';
import { BASIC_CHALLENGE } from '../http/exchange.js';
import type { TenantKeyMaterial } from '../workers/protocol.js';
import { ownBytes } from '../util/buffer-pool.js';
import {
  clusterPaths,
  readClusterSecret,
  readClusterSecretSync,
  readJoinSecretSync,
} from '../cluster/node-state.js';

/**
 * What a cluster member signs under a key of the cluster secret (`cluster-<purpose>`) instead of
 * its master key, so that it is good on every member: bearer tokens, listing continuation
 * tokens and signed URLs.
 */
const CLUSTER_PURPOSES: readonly string[] = [
  PURPOSE_NATIVE_TOKEN,
  PURPOSE_LIST_TOKEN,
  PURPOSE_SIGNED_URL,
];
/** How often a node waiting to be joined looks for its cluster secret when no watch fires. */
const CLUSTER_LOOK_MS = 2_000;

export interface Principal {
  readonly accessKeyId: string;
  readonly tenant: TenantRecord;
  readonly scope: Scope;
}

/**
 * Whom a request claims to come from, for its audit row: filled in as soon as it is known, before
 * the checks that may still refuse it, so that a denial is audited under the key and its tenant.
 */
export interface Claimant {
  actor?: string;
  tenantId?: string;
}

export class Authenticator {
  private masterKey: Buffer;
  /** The check value of `masterKey`, compared with the index's on each request. */
  private masterCheck: Buffer;
  /** The key derived for each purpose handed out; rewritten in place by a rotation. */
  private readonly purposeKeys = new Map<string, Buffer>();
  private readonly tokenKey: Buffer;
  private readonly sealKey: Buffer;
  private reloading: Promise<void> | undefined;
  private readonly scopes = new Map<string, Scope>();
  private readonly tenantKeys = new Map<string, { material: TenantKeyMaterial; wrapped: Buffer }>();
  private readonly tokens = new Map<string, NativeTokenPayload>();
  /** Bearer tokens are signed under the cluster's key (`followCluster`). */
  private clustered = false;
  /** While this node waits to be joined: looks for the cluster secret now (`followCluster`). */
  private lookForCluster: (() => void) | undefined;
  private readonly secrets = new Map<string, { sealed: Buffer; secret: string }>();

  constructor(
    private readonly paths: DataDirPaths,
    private readonly store: IndexStore,
  ) {
    this.masterKey = readCurrentMasterKeySync(paths, store, readMasterKeySync(paths));
    // A gateway started on its own may be given another key file than its engine's.
    verifyMasterKey(store, this.masterKey, paths.masterKey);
    this.masterCheck = masterKeyCheckOf(this.masterKey);
    this.tokenKey = this.purposeKey(PURPOSE_NATIVE_TOKEN);
    this.sealKey = this.purposeKey(PURPOSE_SECRET_SEAL);
    this.followCluster();
  }

  /**
   * In a cluster, tokens are signed under keys of the cluster secret (CLUSTER_PURPOSES) instead
   * of this node's master key, so a token minted on one member is good on every member
   * (docs/cluster.md §6). The keys' bytes are replaced in place, as a master-key rotation
   * replaces them, so every holder of `purposeKey(…)` (the ingest stream, say) follows.
   *
   * A node waiting to be joined learns of its join from the cluster directory: the agent writes
   * the secret there (by rename) before it connects to etcd and long before the control-plane
   * records of the cluster reach this node's index, so a watch on the directory loads it first.
   * A slow poll stays as the fallback where watches are not delivered, and a token that fails to
   * verify meanwhile starts a look at once. A single node never looks.
   */
  private followCluster(): void {
    const paths = clusterPaths(this.paths.root);
    const secret = readClusterSecretSync(paths);
    if (secret !== undefined) {
      this.useClusterSecret(secret);
      return;
    }
    if (readJoinSecretSync(paths) === undefined) return;
    const name = basename(paths.secret);
    let watcher: FSWatcher | undefined;
    let looking = false;
    const poll = setInterval(() => look(), CLUSTER_LOOK_MS).unref();
    const look = (): void => {
      if (looking || this.clustered) return;
      looking = true;
      readClusterSecret(paths).then(
        (found) => {
          watcher?.close();
          clearInterval(poll);
          this.lookForCluster = undefined;
          this.useClusterSecret(found);
        },
        () => (looking = false), // not there yet (or half-written: a later event looks again)
      );
    };
    try {
      watcher = watch(paths.dir, { persistent: false }, (_event, file) => {
        if (file === null || file === name) look();
      });
      watcher.on('error', () => watcher?.close());
    } catch {
      watcher = undefined; // no watch here: the poll alone
    }
    this.lookForCluster = look;
  }

  /**
   * The master key's subkey for `purpose` (a `PURPOSE_*` of `src/security/keys.ts`): one Buffer
   * per purpose, whose bytes a master-key rotation replaces in place.
   */
  purposeKey(purpose: string): Buffer {
    let key = this.purposeKeys.get(purpose);
    if (!key) {
      key = deriveKey(this.masterKey, purpose);
      this.purposeKeys.set(purpose, key);
    }
    return key;
  }

  private useClusterSecret(secret: Buffer): void {
    for (const purpose of CLUSTER_PURPOSES)
      deriveKey(secret, `cluster-${purpose}`).copy(this.purposeKey(purpose));
    this.clustered = true;
    this.tokens.clear();
  }

  /**
   * Follows a master-key rotation: when the index records another key's check value, the new
   * key is read in the background and this request (and any until it is loaded) answers 503.
   */
  private currentMasterKey(): void {
    const recorded = this.store.getShared<MasterKeyCheckRecord>(DB.meta, META_MASTER_KEY_CHECK);
    if (!recorded || this.masterCheck.equals(recorded.check)) return;
    this.reloading ??= readCurrentMasterKey(this.paths, this.store)
      .then((key) => this.useMasterKey(key))
      .catch(() => undefined)
      .finally(() => {
        this.reloading = undefined;
      });
    throw Unavailable('the master key was just rotated; retry the request', {
      retryAfterSeconds: 1,
    });
  }

  private useMasterKey(key: Buffer): void {
    const check = masterKeyCheckOf(key);
    const recorded = this.store.getShared<MasterKeyCheckRecord>(DB.meta, META_MASTER_KEY_CHECK);
    if (!recorded || !check.equals(recorded.check)) return; // not (yet) the recorded key
    this.masterKey = key;
    this.masterCheck = check;
    for (const [purpose, derived] of this.purposeKeys)
      if (!(this.clustered && CLUSTER_PURPOSES.includes(purpose)))
        deriveKey(key, purpose).copy(derived);
    this.tokens.clear();
    this.tenantKeys.clear();
  }

  /**
   * Verifies `Authorization: Bearer lwtk_…` and the key and tenant behind it. Once the token's
   * signature verifies, `claimant` names its key and tenant, also when the key is revoked.
   */
  authenticate(authorization: string | undefined, claimant: Claimant): Principal {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) throw Unauthorized('a bearer token is required (Authorization: Bearer lwtk_…)');
    this.currentMasterKey();
    const payload = this.verified(match[1] ?? '');
    claimant.actor = payload.kid;
    claimant.tenantId = payload.tid;
    const key = this.liveKey(payload.kid);
    if (key.tenantId !== payload.tid) throw Unauthorized('invalid token');
    return {
      accessKeyId: key.accessKeyId,
      tenant: this.liveTenant(key.tenantId),
      scope: this.scopeOf(key.scopes),
    };
  }

  /**
   * A token's signature is checked once and the result cached until it expires; the key and
   * tenant behind it are still looked up on every request (revocation takes effect at once).
   */
  private verified(token: string): NativeTokenPayload {
    const now = Date.now();
    const cached = this.tokens.get(token);
    if (cached && cached.exp * 1000 > now) return cached;
    let payload: NativeTokenPayload;
    try {
      payload = verifyNativeToken(this.tokenKey, token, now);
    } catch (error) {
      this.lookForCluster?.(); // perhaps minted by a cluster this node has just joined
      throw error;
    }
    if (this.tokens.size >= VERIFIED_TOKENS_MAX)
      this.tokens.delete(this.tokens.keys().next().value as string);
    this.tokens.set(token, payload);
    return payload;
  }

  /**
   * The tenant of an access key, whatever its state (none for an unknown id): whom a token
   * request is audited under before its secret is checked.
   */
  tenantOfKey(accessKeyId: string): string | undefined {
    const key = Buffer.from(accessKeyId);
    return this.store.getShared<AccessKeyRecord>(DB.accessKeys, key, accessKeyId)?.tenantId;
  }

  /** Checks an access key id and secret (token mint); the same answer for every failure. */
  verifySecret(
    accessKeyId: string,
    secretKey: string,
  ): { key: AccessKeyRecord; tenant: TenantRecord } {
    this.currentMasterKey();
    const key = this.store.get<AccessKeyRecord>(DB.accessKeys, Buffer.from(accessKeyId));
    let expected = '';
    if (key)
      expected = openSecret(
        this.sealKey,
        key.sealedSecret,
        `access-key:${key.accessKeyId}`,
      ).toString();
    const matches = constantTimeEqual(expected, secretKey);
    const basic = { challenge: BASIC_CHALLENGE }; // what a 401 here asks the client for
    if (!key || !matches) throw Unauthorized('invalid access key id or secret', basic);
    try {
      return { key: this.liveKey(accessKeyId), tenant: this.liveTenant(key.tenantId) };
    } catch (error) {
      if (isLightwellError(error) && error.code === 'unauthorized')
        throw Unauthorized(error.message, { ...error.details, ...basic });
      throw error;
    }
  }

  /**
   * A live access key with its secret, for the S3 API's SigV4 (which signs with the secret
   * itself): undefined for an unknown id; `unauthorized` for a revoked or expired key or a
   * disabled tenant, checked now, so either stops S3 requests at once.
   */
  credential(accessKeyId: string): { secretKey: string; principal: Principal } | undefined {
    this.currentMasterKey();
    const stored = this.store.getSharedById<AccessKeyRecord>(
      DB.accessKeys,
      accessKeyId,
      accessKeyKey,
    );
    if (!stored) return undefined;
    const key = this.liveKey(accessKeyId, stored);
    const tenant = this.liveTenant(key.tenantId);
    return {
      secretKey: this.secretOf(key),
      principal: { accessKeyId: key.accessKeyId, tenant, scope: this.scopeOf(key.scopes) },
    };
  }

  mint(key: AccessKeyRecord, ttlMs: number): MintedNativeToken {
    const limit = key.expiresAt === undefined ? ttlMs : Math.min(ttlMs, key.expiresAt - Date.now());
    return mintNativeToken(this.tokenKey, {
      accessKeyId: key.accessKeyId,
      tenantId: key.tenantId,
      ttlMs: Math.max(1000, limit),
      nowMs: Date.now(),
    });
  }

  /**
   * The secret of an access key, opened once and kept with the sealed bytes it came from: an
   * S3 request needs it to check its signature, and opening it (AES-GCM through node:crypto)
   * cost more than the rest of the key and tenant look-up. A rotated secret is sealed anew, so
   * its bytes differ and it is opened again.
   */
  private secretOf(key: AccessKeyRecord): string {
    const cached = this.secrets.get(key.accessKeyId);
    if (cached?.sealed.equals(key.sealedSecret)) return cached.secret;
    const secret = openSecret(
      this.sealKey,
      key.sealedSecret,
      `access-key:${key.accessKeyId}`,
    ).toString();
    if (this.secrets.size >= OPENED_SECRETS_MAX) this.secrets.clear();
    this.secrets.set(key.accessKeyId, { sealed: Buffer.from(key.sealedSecret), secret });
    return secret;
  }

  /** `stored`: the key's record when the caller has just read it (one look-up per request). */
  private liveKey(
    accessKeyId: string,
    stored = this.store.getSharedById<AccessKeyRecord>(DB.accessKeys, accessKeyId, accessKeyKey),
  ): AccessKeyRecord {
    const key = stored;
    if (!key || key.state !== 'active') throw Unauthorized('the access key is revoked or unknown');
    if (key.expiresAt !== undefined && key.expiresAt <= Date.now())
      throw Unauthorized('the access key has expired');
    return key;
  }

  private liveTenant(tenantId: string): TenantRecord {
    const tenant = this.store.getSharedById<TenantRecord>(DB.tenants, tenantId, tenantKey);
    if (!tenant || tenant.state !== 'active')
      throw Unauthorized('the tenant is disabled or unknown');
    return tenant;
  }

  private scopeOf(text: string): Scope {
    let scope = this.scopes.get(text);
    if (!scope) {
      scope = parseScopes(text);
      if (this.scopes.size > 10_000) this.scopes.clear();
      this.scopes.set(text, scope);
    }
    return scope;
  }

  keysOf(tenant: TenantRecord): TenantKeyMaterial {
    const cached = this.tenantKeys.get(tenant.id);
    if (
      cached &&
      cached.material.tenantNum === tenant.num &&
      cached.wrapped.equals(tenant.wrappedKey) &&
      // Retired keys dropped after a re-encryption leave the cache too.
      (cached.material.retiredDataKeys?.length ?? 0) === (tenant.retiredKeys?.length ?? 0)
    )
      return cached.material;
    const unwrap = (wrapped: Uint8Array): Buffer =>
      unwrapTenantKey(this.masterKey, tenant.id, Buffer.from(wrapped));
    const dataKey = unwrap(tenant.wrappedKey);
    // Each pool task carries these: each in its own ArrayBuffer (see ownBytes).
    const material: TenantKeyMaterial = {
      tenantNum: tenant.num,
      dataKey: ownBytes(dataKey),
      dedupKey: ownBytes(dedupKey(dataKey)),
      ...(tenant.retiredKeys?.length && {
        retiredDataKeys: tenant.retiredKeys.map((retired) => ownBytes(unwrap(retired.wrappedKey))),
      }),
    };
    this.tenantKeys.set(tenant.id, { material, wrapped: Buffer.from(tenant.wrappedKey) });
    return material;
  }
}

export function authorize(principal: Principal, request: ScopeRequest): void {
  if (!allows(principal.scope, request)) {
    throw Forbidden(
      `the access key may not ${request.verb}${request.bucket ? ` in bucket ${request.bucket}` : ''}`,
    );
  }
}

// `lightwell kms-key create|list|delete`: the named KMS keys of a tenant (the ids SSE-KMS writes
// may name), through the admin API of a running Lightwell. The admin listener is the
// `admin_listen` setting (or --endpoint URL); the bearer token is --token or the environment's
// LIGHTWELL_ADMIN_TOKEN (an operator token, `lightwell admin-token create --role operator`),
// never echoed. Answers print as JSON; a problem prints its detail and exits 1.

import {
  parseArgs,
  settingsFrom,
  failureText,
  isUsageError,
  UsageError,
  EXIT_FAILURE,
  EXIT_USAGE,
} from './args.js';

const USAGE =
  'usage: lightwell kms-key create TENANT KEY_ID [--description TEXT] [--endpoint URL] [--token T]\n' +
  '       lightwell kms-key list TENANT [--endpoint URL] [--token T]\n' +
  '       lightwell kms-key delete TENANT KEY_ID [--endpoint URL] [--token T]\n' +
  '  the token defaults to $LIGHTWELL_ADMIN_TOKEN, the endpoint to http://<admin_listen>';

const SPEC = {
  options: new Set(['description', 'endpoint', 'token']),
  positional: true,
} as const;

export async function kmsKeyCommand(argv: readonly string[]): Promise<number> {
  try {
    const args = parseArgs(argv, SPEC);
    if (args.flags.has('help')) {
      process.stdout.write(USAGE + '\n');
      return 0;
    }
    const [action, tenant, keyId, ...rest] = args.positional;
    const needsKey = action === 'create' || action === 'delete';
    if (action !== 'list' && !needsKey)
      throw UsageError(action === undefined ? 'no action given' : `unknown action ${action}`);
    if (tenant === undefined || (needsKey && keyId === undefined))
      throw UsageError(needsKey ? 'TENANT and KEY_ID are required' : 'TENANT is required');
    if (rest.length > 0 || (!needsKey && keyId !== undefined))
      throw UsageError(`unexpected argument ${rest[0] ?? keyId ?? ''}`);
    const token = args.options.get('token') ?? process.env['LIGHTWELL_ADMIN_TOKEN'];
    if (token === undefined || token === '')
      throw UsageError('no admin token: --token or LIGHTWELL_ADMIN_TOKEN');
    const listen = settingsFrom(args, SPEC).listen('admin_listen');
    const endpoint = args.options.get('endpoint') ?? `http://${listen.host}:${listen.port}`;
    const base = `${endpoint.replace(/\/+$/, '')}/admin/api/v1/tenants/${encodeURIComponent(tenant)}/kms-keys`;
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    const init: RequestInit = { headers };
    let url = base;
    if (action === 'create') {
      const description = args.options.get('description');
      init.method = 'POST';
      headers['content-type'] = 'application/json';
      init.body = JSON.stringify({ id: keyId, ...(description ? { description } : {}) });
    } else if (action === 'delete') {
      init.method = 'DELETE';
      url = `${base}/${encodeURIComponent(keyId as string)}`;
    }
    const response = await fetch(url, init);
    const text = await response.text();
    if (!response.ok) {
      const detail = (JSON.parse(text || '{}') as { detail?: string }).detail;
      process.stderr.write(`lightwell kms-key: ${response.status} ${detail ?? text}\n`);
      return EXIT_FAILURE;
    }
    process.stdout.write(action === 'delete' ? `deleted ${keyId ?? ''}\n` : `${text}\n`);
    return 0;
  } catch (error) {
    const usage = isUsageError(error);
    process.stderr.write(`lightwell kms-key: ${failureText(error)}\n${usage ? USAGE + '\n' : ''}`);
    return usage ? EXIT_USAGE : EXIT_FAILURE;
  }
}

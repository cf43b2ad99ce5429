// The console's entry: sign-in with an admin token, kept in this page's memory only (a reload
// signs out; nothing is written to storage or cookies), then the pages, chosen by the URL's
// hash (#/tenants/acme) so every page has a link and the server serves one document.
//
// What a page shows follows the token: its role hides every control the role may not use (a
// viewer sees none that changes anything) and a tenant-scoped token sees only its tenant.

import 'uplot/dist/uPlot.min.css';
import './style.css';
import { render, type JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Api, ApiError, CONSOLE, type Session } from './api.js';
import { ErrorBox, Field } from './ui.js';
import { OverviewPage } from './overview.js';
import { TenantsPage } from './tenants.js';
import { TenantPage } from './tenant.js';
import { AuditPage } from './audit.js';
import { ClusterPage } from './cluster.js';
import { EncryptionPage } from './encryption.js';
import { BackupsPage } from './backups.js';

export interface Context {
  readonly api: Api;
  readonly session: Session;
}

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = (): void => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return hash;
}

function SignIn(props: { onSignedIn: (context: Context) => void }): JSX.Element {
  const [token, setToken] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    const api = new Api(token.trim());
    try {
      const session = await api.get<Session>(`${CONSOLE}/session`);
      props.onSignedIn({ api, session });
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form class="card signin-card" onSubmit={(event) => void submit(event)}>
        <h1>
          <span class="logo" aria-hidden="true" />
          Lightwell console
        </h1>
        <p>
          Sign in with an admin token (<code>lwadm_…</code>) made by{' '}
          <code>lightwell admin-token create</code>. It stays in this page's memory only and is sent
          with each request; reloading the page signs you out.
        </p>
        <Field
          label="Admin token"
          type="password"
          name="token"
          value={token}
          onInput={setToken}
          required
          autoFocus
        />
        <ErrorBox error={error} />
        <button type="submit" class="primary" disabled={busy || token.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}

const NAV: ReadonlyArray<readonly [string, string]> = [
  ['#/', 'Overview'],
  ['#/tenants', 'Tenants'],
  ['#/encryption', 'Encryption keys'],
  ['#/backups', 'Backups'],
  ['#/audit', 'Audit log'],
  ['#/cluster', 'Cluster'],
];

function Page(props: { context: Context; hash: string }): JSX.Element {
  const parts = props.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const [first = '', second, third] = parts;
  switch (first) {
    case '':
      return <OverviewPage context={props.context} />;
    case 'tenants':
      return second === undefined || second === '' ? (
        <TenantsPage context={props.context} />
      ) : (
        <TenantPage context={props.context} tenantId={second} tab={third ?? 'overview'} />
      );
    case 'audit':
      return <AuditPage context={props.context} />;
    case 'cluster':
      return <ClusterPage context={props.context} />;
    case 'encryption':
      return <EncryptionPage context={props.context} />;
    case 'backups':
      return <BackupsPage context={props.context} />;
    default:
      return <p>No such page. Choose one from the menu.</p>;
  }
}

function App(): JSX.Element {
  const [context, setContext] = useState<Context | undefined>(undefined);
  const hash = useHash();
  if (!context) return <SignIn onSignedIn={setContext} />;
  const { session } = context;
  const current = '#/' + (hash.replace(/^#\/?/, '').split('/')[0] ?? '');
  return (
    <div class="shell">
      <nav class="sidebar" aria-label="Pages">
        <div class="brand">
          <span class="logo" aria-hidden="true" />
          Lightwell
        </div>
        <ul>
          {NAV.filter(([href]) => href !== '#/backups' || session.tenant === null).map(
            ([href, label]) => (
              <li key={href}>
                <a href={href} aria-current={current === href ? 'page' : undefined}>
                  {label}
                </a>
              </li>
            ),
          )}
        </ul>
        <div class="whoami" aria-label="Signed in as">
          <div>
            <span class={`badge badge-role`}>{session.role}</span>
            {session.tenant !== null && <span class="badge">tenant {session.tenant}</span>}
          </div>
          <div class="muted">{session.name ?? session.tokenId}</div>
          <button type="button" class="link" onClick={() => setContext(undefined)}>
            Sign out
          </button>
        </div>
      </nav>
      <main class="content">
        <Page context={context} hash={hash} />
      </main>
    </div>
  );
}

export function isUnauthorized(error: unknown): boolean {
  return error instanceof ApiError && error.problem.status === 401;
}

const root = document.getElementById('app');
if (root) render(<App />, root);

// The console API as the console tests call it: one JSON request to /admin/console/api/ with an
// optional bearer token and body, answered as status and parsed JSON (undefined when empty).
// Shared by every console API test so that each states only what it checks.
import type { Service } from '../helpers/service.js';

export interface Answer {
  status: number;
  json: unknown;
}

export type ConsoleCall = (
  method: string,
  path: string,
  token?: string,
  body?: unknown,
) => Promise<Answer>;

/** The console API's origin and path prefix on the service's admin listener. */
export function consoleApiBase(service: Service): string {
  return service.adminUrl.replace('/admin/api/v1', '') + '/admin/console/api';
}

/** A caller of `service`'s console API. */
export function consoleCaller(service: Service): ConsoleCall {
  const base = consoleApiBase(service);
  return async (method, path, token, body) => {
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (token !== undefined) headers['Authorization'] = `Bearer ${token}`;
    const init: RequestInit = { method, headers };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(base + path, init);
    const text = await response.text();
    return { status: response.status, json: text === '' ? undefined : JSON.parse(text) };
  };
}

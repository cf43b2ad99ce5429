// Headless Chromium for the console's browser tests: Debian's `chromium`, installed with apt-get
// when the tests run as root and it is missing; otherwise the tests skip and say why. Pages are
// driven through puppeteer-core (no browser download), one browser per test file.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { Service, type ServiceOptions } from '../helpers/service.js';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser'];

/**
 * Where the screenshots go: docs/console/ (shown by docs/console.md) with
 * LIGHTWELL_UPDATE_SCREENSHOTS=1, else a temporary directory, so that a test run leaves the
 * working tree as it was (every run's pictures differ in their timestamps and ids).
 */
export const UPDATE_SHOTS = process.env['LIGHTWELL_UPDATE_SCREENSHOTS'] === '1';
export const SHOTS_DIR = UPDATE_SHOTS
  ? join(dirname(fileURLToPath(import.meta.url)), '../../../docs/console')
  : join(tmpdir(), `lightwell-console-shots-${String(process.pid)}`);

function found(): string | undefined {
  return CANDIDATES.find((path) => existsSync(path));
}

/** The Chromium binary, installing Debian's package when possible; else the reason it is not. */
export function chromiumPath(): { path: string } | { skip: string } {
  const present = found();
  if (present !== undefined) return { path: present };
  if (process.getuid?.() !== 0)
    return { skip: 'chromium is not installed (apt-get install chromium)' };
  const install = (): boolean =>
    spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=600', 'install', '-y', 'chromium'], {
      stdio: 'ignore',
      timeout: 900_000,
    }).status === 0;
  if (!install()) {
    spawnSync('apt-get', ['update'], { stdio: 'ignore', timeout: 300_000 });
    install();
  }
  const after = found();
  return after === undefined ? { skip: 'apt-get could not install chromium' } : { path: after };
}

export async function launch(path: string): Promise<Browser> {
  return puppeteer.launch({
    executablePath: path,
    headless: true,
    // The tests run as root in a container: Chromium's sandbox needs user namespaces it may
    // not have. The pages it loads are the console's own, from loopback.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run'],
  });
}

/** A new page at laptop size; script errors and CSP violations ("Refused to …") go to `errors`. */
export async function newPage(browser: Browser, errors: string[]): Promise<Page> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1366, height: 860 });
  page.on('pageerror', (error) => errors.push(`page error: ${String(error)}`));
  page.on('console', (message) => {
    const text = message.text();
    // Refused API calls (401, 403, 409…) are part of the tests; the page shows them itself.
    if (message.type() === 'error' && !text.startsWith('Failed to load resource'))
      errors.push(`console: ${text}`);
  });
  return page;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS_DIR, { recursive: true });
  await page.screenshot({ path: join(SHOTS_DIR, `${name}.png`), fullPage: true });
}

/** Texts of the page's enabled buttons (what a user could press). */
export async function buttonTexts(page: Page): Promise<string[]> {
  return page.$$eval('button', (buttons: Array<{ textContent: string | null }>) =>
    buttons.map((button) => (button.textContent ?? '').trim()),
  );
}

// Browser globals, used inside page.evaluate callbacks (tests compile without the DOM library).
declare const document: { body: { innerText: string } };
declare const location: { hash: string };

const WAIT_MS = 20_000;

export async function waitText(page: Page, text: string): Promise<void> {
  try {
    await page.waitForFunction(
      (wanted: string) => document.body.innerText.includes(wanted),
      { timeout: WAIT_MS },
      text,
    );
  } catch (error) {
    const body = await page.evaluate(() => document.body.innerText);
    throw new Error(`timed out waiting for the page to show "${text}"; it shows:\n${body}`, {
      cause: error,
    });
  }
}

export async function textOf(page: Page, selector: string): Promise<string> {
  return String(
    await page.$eval(selector, (node: { textContent: string | null }) => node.textContent),
  );
}

export async function fill(page: Page, label: string, value: string): Promise<void> {
  await page.locator(`::-p-aria(${label})`).fill(value);
}

export async function press(page: Page, name: string): Promise<void> {
  await page.locator(`::-p-aria(${name}[role="button"])`).click();
}

export async function go(page: Page, hash: string, heading: string): Promise<void> {
  await page.evaluate((target: string) => {
    location.hash = target;
  }, hash);
  await waitText(page, heading);
}

export async function signIn(
  page: Page,
  service: Pick<Service, 'adminUrl'>,
  token: string,
): Promise<void> {
  const base = service.adminUrl.replace('/admin/api/v1', '');
  await page.goto(`${base}/admin/console/`);
  // By keyboard alone: the token field has the focus, Enter submits.
  await page.waitForSelector('input:focus');
  await page.keyboard.type(token);
  await page.keyboard.press('Enter');
  await waitText(page, 'Sign out');
}

/** What a console browser test is given: the service, the browser, and the pages' errors. */
export interface BrowserKit {
  readonly service: Service;
  readonly browser: Browser;
  /** Script errors and CSP violations of every page opened with `newPage(browser, errors)`. */
  readonly errors: string[];
}

/**
 * One console test in a real browser: a service on loopback and Chromium, both closed when the
 * test ends (and the screenshots dropped unless being updated). The file skips, saying why,
 * when Chromium cannot be had.
 */
export function browserTest(
  name: string,
  body: (t: Test, kit: BrowserKit) => Promise<void>,
  options: ServiceOptions = {},
): void {
  const chromium = chromiumPath();
  if ('skip' in chromium) {
    t.plan(0, chromium.skip);
    return;
  }
  t.test(name, async (t) => {
    const service = await Service.start(options);
    t.teardown(async () => {
      await service.close();
      if (!UPDATE_SHOTS) rmSync(SHOTS_DIR, { recursive: true, force: true });
    });
    const browser = await launch(chromium.path);
    t.teardown(() => browser.close());
    await body(t, { service, browser, errors: [] });
  });
}

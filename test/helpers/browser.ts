import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
const CHROMIUM = '/usr/bin/chromium';

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
}

export interface ConsolePage {
  page: Page;
  /** Uncaught script errors seen so far: the console must have none. */
  scriptErrors: string[];
  /** Requests to any other origin seen so far: the console works offline, so there must be none. */
  foreignRequests: string[];
}

/** A fresh tab (its own sessionStorage) on `url`, recording uncaught script errors and requests to other origins. */
export async function openPage(browser: Browser, url: string, viewport = { width: 1280, height: 900 }): Promise<ConsolePage> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const scriptErrors: string[] = [];
  page.on('pageerror', (error) => scriptErrors.push(error.message));
  const foreignRequests: string[] = [];
  const origin = new URL(url).origin;
  page.on('request', (request) => {
    const target = new URL(request.url());
    if (target.protocol !== 'blob:' && target.protocol !== 'data:' && target.origin !== origin) foreignRequests.push(request.url());
  });
  await page.goto(url);
  return { page, scriptErrors, foreignRequests };
}

/**
 * The serious and critical WCAG 2.1 A/AA violations axe-core finds on the page as it is now.
 * axe is evaluated through the DevTools protocol, which the page's CSP does not govern, so the
 * console is checked under the policy it is served with.
 */
export async function seriousAxeViolations(page: Page): Promise<string[]> {
  const loaded = await page.evaluate('typeof window.axe');
  if (loaded === 'undefined') await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(context: Document, options: unknown): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }>;
        };
      }
    ).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return result.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      help: violation.help,
      targets: violation.nodes.map((node) => node.target.join(' ')),
    }));
  });
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${violation.id} (${violation.impact}): ${violation.help} at ${violation.targets.join(', ')}`);
}

// The web view in a real browser: Debian's chromium, driven headless by playwright-core, against
// a live-lab collector after a real capture (the cni-masquerade scenario: agents, namespaces,
// kernel NAT). Logs in through the form, checks the verdict text and the sequence picture's lanes
// and arrows, opens the repro-free list and the bundle's HTML report, and keeps screenshots in
// lab-out/screenshots/ (the README's come from here). Fails with the reason when chromium or the
// lab's prerequisites are missing. Traffic stays inside the lab's namespaces and loopback.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import t from 'tap';
import { LiveCollector, runLiveScenario } from '../../lab/live';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario } from '../../lab/scenarios';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = join(__dirname, '..', '..', '..', 'lab-out', 'screenshots');

const missing = missingPrerequisites();
if (!existsSync(CHROMIUM))
  missing.push(`${CHROMIUM} not found (apt-get install chromium; scripts/setup.sh installs it)`);

if (missing.length > 0) {
  t.fail(`LAB_PREREQUISITE: ${missing.join('; ')}`);
} else {
  void t.test('a live capture in the web view, in chromium', async (t) => {
    const collector = await LiveCollector.start();
    const held: { browser?: Browser } = {};
    t.teardown(async () => {
      await held.browser?.close().catch(() => undefined);
      await collector.close();
    });
    const scenario = findScenario('cni-masquerade');
    if (scenario === undefined) throw new Error('no cni-masquerade scenario');
    const run = await runLiveScenario(collector, scenario);
    t.equal(run.verdict?.layer, 'cni-masquerade', 'the capture itself resolved');
    mkdirSync(SHOTS, { recursive: true });

    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      // As root, chromium needs --no-sandbox; the page is our own collector on loopback.
      args: ['--no-sandbox', '--disable-gpu'],
    });
    held.browser = browser;
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const external: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(`http://127.0.0.1:${collector.port}/`)) external.push(r.url());
    });
    const base = `http://127.0.0.1:${collector.port}`;

    // Not logged in: the form, then back to the page asked for.
    await page.goto(`${base}/ui/captures/${run.captureId}`);
    t.match(page.url(), /\/ui\/login\?next=/);
    await page.fill('input[name="token"]', collector.token);
    await Promise.all([
      page.waitForURL(`**/ui/captures/${run.captureId}`),
      page.click('button[type="submit"]'),
    ]);
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === 'hoptrace_ui');
    t.ok(session?.httpOnly, 'an HttpOnly session cookie');
    t.not(session?.value, collector.token, 'the cookie is not the token');
    t.notMatch(page.url(), new RegExp(collector.token), 'the token never in a URL');

    t.equal((await page.textContent('p.verdict'))?.trim(), 'cni-masquerade', 'the verdict');
    t.match(
      await page.textContent('pre.verdict-text'),
      /source rewritten by the VPN node's CNI masquerade/,
    );
    const lanes = await page.locator('.picture svg .lane').count();
    t.equal(lanes, 3, 'one lane per point in the picture');
    t.ok(
      (await page.locator('.picture svg .arrow.request').count()) >= 2,
      'request arrows between lanes',
    );
    t.ok((await page.locator('.picture svg .arrow.reply').count()) >= 1, 'reply arrows');
    t.ok(
      (await page.locator('.picture svg .changed').count()) >= 1,
      'the changed source highlighted',
    );
    t.equal(await page.locator('script').count(), 0, 'no script on the page');
    await page.screenshot({ path: join(SHOTS, 'web-view-capture.png'), fullPage: true });

    // The list.
    await page.goto(`${base}/ui/`);
    t.ok(
      await page.locator(`a[href="/ui/captures/${run.captureId}"]`).count(),
      'the capture is listed',
    );
    await page.screenshot({ path: join(SHOTS, 'web-view-list.png'), fullPage: true });

    // The bundle's HTML report, as a reader who was sent the file sees it.
    const html = await page.request.get(`${base}/ui/captures/${run.captureId}/files/report.html`);
    t.equal(html.status(), 200, 'report.html is in the bundle');
    const report = await context.newPage();
    await report.setContent(await html.text());
    t.equal(await report.locator('svg .lane').count(), 3, 'the report carries the picture');
    t.equal(await report.locator('script').count(), 0);
    await report.screenshot({ path: join(SHOTS, 'report-html.png'), fullPage: true });
    t.same(external, [], 'nothing fetched from anywhere but the collector');
  });
}

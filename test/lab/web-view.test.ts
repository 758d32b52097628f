// The web view in a real browser: Debian's chromium, driven headless by playwright-core, against
// a live-lab collector after a real capture (the cni-masquerade scenario: agents, namespaces,
// kernel NAT). Logs in through the form, checks the verdict text and the sequence picture's lanes
// and arrows, opens the list and the bundle's HTML report; then a repro (the stable-gateway lab:
// the VPN pod deleted and replaced) opened while it runs and once it finished: the timeline
// picture's probe marks, broken window and deletion mark, the summary, every bundle download (the
// whole bundle first, unpacked with tar and checked with sha256sum -c). Keeps
// screenshots in lab-out/screenshots/ (the README's come from here). Fails with the reason when chromium or the
// lab's prerequisites are missing. Traffic stays inside the lab's namespaces and loopback.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import t from 'tap';
import type tap from 'tap';
import { LiveCollector, runLiveScenario } from '../../lab/live';
import { missingPrerequisites } from '../../lab/prereq';
import { findScenario } from '../../lab/scenarios';
import { DEFAULT_REPRO_OPTIONS, REPRO_SCENARIOS, runRepro } from '../../lab/repro';
import type { ReproView } from '../../collector';
import { checkManifest, parseManifest } from '../../common/sha256sums';
import { untar } from '../unit/archive-check';
import { checkSums } from '../unit/sums-check';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = join(__dirname, '..', '..', '..', 'lab-out', 'screenshots');

/** A context and page of a new headless chromium (kept in `held` for the teardown to close). */
async function newPage(held: {
  browser?: Browser;
}): Promise<{ context: BrowserContext; page: Page }> {
  mkdirSync(SHOTS, { recursive: true });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // As root, chromium needs --no-sandbox; the page is our own collector on loopback.
    args: ['--no-sandbox', '--disable-gpu'],
  });
  held.browser = browser;
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  return { context, page: await context.newPage() };
}

/** The hrefs of the page's download list, in order. */
async function hrefs(page: Page): Promise<string[]> {
  const anchors = page.locator('ul.files a');
  const out: string[] = [];
  for (let i = 0; i < (await anchors.count()); i++)
    out.push((await anchors.nth(i).getAttribute('href')) ?? '');
  return out;
}

/**
 * The whole-bundle download as the browser's session gets it: an attachment named
 * hoptrace-<id>.tar that unpacks to hoptrace-<id>/, where `sha256sum -c SHA256SUMS` passes.
 */
async function checkArchive(
  t: Pick<typeof tap, 'equal' | 'same' | 'ok' | 'teardown'>,
  page: Page,
  url: string,
  id: string,
): Promise<void> {
  const r = await page.request.get(url);
  t.equal(r.status(), 200, `hoptrace-${id}.tar downloads`);
  t.equal(r.headers()['content-disposition'], `attachment; filename="hoptrace-${id}.tar"`);
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-web-view-tar-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const x = untar(await r.body(), dir);
  t.equal(x.status, 0, `tar xf: ${x.stderr}`);
  t.same(x.tops, [`hoptrace-${id}`], 'it unpacks to hoptrace-<id>/');
  const sums = checkSums(join(x.root, `hoptrace-${id}`));
  t.ok(sums.ok, `${sums.how} in hoptrace-${id}/: ${sums.out}`);
}

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
    const { context, page } = await newPage(held);
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

    // The whole bundle, first of the downloads: through the browser's session, tar xf, then
    // sha256sum -c in hoptrace-<id>/ with no file renamed.
    await page.goto(`${base}/ui/captures/${run.captureId}`);
    const capLinks = await hrefs(page);
    t.equal(
      capLinks[0],
      `/ui/captures/${run.captureId}/files/hoptrace-${run.captureId}.tar`,
      'the whole bundle is the first download',
    );
    t.ok(capLinks.length > 1, 'each file after it');
    await checkArchive(t, page, `${base}${capLinks[0] ?? ''}`, run.captureId);

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

  void t.test('a repro in the web view, while it runs and once it finished', async (t) => {
    const collector = await LiveCollector.start();
    const held: { browser?: Browser } = {};
    t.teardown(async () => {
      await held.browser?.close().catch(() => undefined);
      await collector.close();
    });
    const { context, page } = await newPage(held);
    const base = `http://127.0.0.1:${collector.port}`;
    await page.goto(`${base}/ui/`);
    await page.fill('input[name="token"]', collector.token);
    await Promise.all([page.waitForURL('**/ui/'), page.click('button[type="submit"]')]);

    const scenario = REPRO_SCENARIOS.find((s) => s.name === 'stable-gateway');
    if (scenario === undefined) throw new Error('no stable-gateway repro scenario');
    // While it runs (after a few probes): the page says so and refreshes itself (no script).
    const check: {
      running?: Promise<{ state: string; refresh: number; note: string; probes: number }>;
    } = {};
    const run = await runRepro(collector, scenario, DEFAULT_REPRO_OPTIONS, (v: ReproView, n) => {
      if (check.running !== undefined || n < 2) return;
      check.running = (async () => {
        const p = await context.newPage();
        await p.goto(`${base}/ui/repros/${v.id}`);
        const out = {
          state: (await p.textContent('span.state')) ?? '',
          refresh: await p.locator('meta[http-equiv="refresh"]').count(),
          note: (await p.textContent('main')) ?? '',
          probes: await p.locator('.picture svg g.probe').count(),
        };
        await p.screenshot({ path: join(SHOTS, 'web-view-repro-running.png'), fullPage: true });
        await p.close();
        return out;
      })();
      check.running.catch(() => undefined); // awaited (and its failure reported) below
    });
    if (check.running === undefined) throw new Error('the running repro page was never opened');
    const seen = await check.running;
    t.equal(seen.state, 'running', 'while it runs: state running');
    t.equal(seen.refresh, 1, 'while it runs: the page refreshes itself');
    t.match(seen.note, /Running — this page refreshes every 2 s/);
    t.ok(seen.probes >= 2, `while it runs: the probes so far drawn (${seen.probes})`);

    const v = run.view;
    t.equal(v.state, 'finished');
    await page.goto(`${base}/ui/repros/${v.id}`);
    t.equal((await page.textContent('span.state'))?.trim(), 'finished', 'finished');
    t.equal(await page.locator('meta[http-equiv="refresh"]').count(), 0, 'no refresh once done');
    t.match(
      (await page.textContent('p.verdict'))?.trim(),
      /^recovered; broken for \d+ ms$/,
      'the summary: recovered, and for how long',
    );
    t.match(await page.textContent('main'), v.summary?.why ?? '-', 'the summary says why');
    t.equal(
      await page.locator('.picture svg g.probe').count(),
      v.timeline.length,
      'one mark per probe',
    );
    t.equal(await page.locator('.picture svg rect.broken-window').count(), 1, 'the broken window');
    t.ok((await page.locator('.picture svg g.mark.deleted').count()) >= 1, 'the deletion marked');
    t.ok(
      (await page.locator('.picture svg g.mark.replacement-ready').count()) >= 1,
      'the replacement marked',
    );
    t.equal(
      await page.locator('.picture svg g.probe.failed-to-connect').count(),
      v.timeline.filter((r) => r.verdict === 'failed-to-connect').length,
      'the probes that could not connect drawn as such',
    );
    const links = await hrefs(page);
    t.same(
      links.map((h) => h.split('/').at(-1)),
      [
        `hoptrace-${v.id}.tar`,
        'report.md',
        'report.json',
        'report.html',
        'timeline.svg',
        'evidence.pcapng',
        'inventory.json',
        'SHA256SUMS',
      ],
      'the whole bundle, then every file of it to download',
    );
    await checkArchive(t, page, `${base}${links[0] ?? ''}`, v.id);
    const sumsReply = await page.request.get(`${base}/ui/repros/${v.id}/files/SHA256SUMS`);
    t.equal(sumsReply.status(), 200, 'SHA256SUMS downloads');
    const parsed = parseManifest(await sumsReply.text());
    if (!parsed.ok) t.fail(`SHA256SUMS reads: ${parsed.problem}`);
    else {
      const files = new Map<string, Uint8Array>();
      for (const name of links.slice(1).map((h) => h.split('/').at(-1) ?? '')) {
        if (name === 'SHA256SUMS') continue;
        const r = await page.request.get(`${base}/ui/repros/${v.id}/files/${name}`);
        files.set(name, await r.body());
      }
      const check = checkManifest(parsed.sums, files);
      t.same(
        { mismatched: check.mismatched, absent: check.absent, unlisted: check.unlisted },
        { mismatched: [], absent: [], unlisted: [] },
        'every file the web view serves is the one SHA256SUMS lists',
      );
      t.equal(check.verified.length, files.size, 'each linked file verified');
    }
    const pcap = await page.request.get(`${base}/ui/repros/${v.id}/files/evidence.pcapng`);
    t.equal(pcap.status(), 200, 'evidence.pcapng downloads');
    t.match(pcap.headers()['content-type'], /application\/vnd\.tcpdump\.pcap/);
    t.equal(await page.locator('script').count(), 0, 'no script on the page');
    await page.screenshot({ path: join(SHOTS, 'web-view-repro.png'), fullPage: true });
  });
}

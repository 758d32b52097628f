/**
 * `hoptrace capture` against a started collector (port 0, fake hub whose agents answer with events
 * replayed from a public pcap), and `hoptrace collector` start/stop.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseCapturePoint, parseDuration, runCapture, targetNoteLines } from '../../cli/capture';
import { parseListen, runCollector } from '../../cli/collector';
import { silentLogger } from '../../collector/logger';
import type { CaptureView } from '../../collector/capture-views';
import { startCollector, type RunningCollector } from '../../collector/main';
import { isHoptraceError } from '../../common/errors';
import { answerWithReplay, FakeHub, twoNodeHub } from './collector-fixtures';
import { PCAPS } from './corpus';

const TOKEN = 'cli-test-token';
const PCAP = join(PCAPS, 'zeek_http-get.pcap');
const ENV = { HOPTRACE_TOKEN: TOKEN };
const POINT_ARGS = [
  '--point',
  'decap=10.244.1.10:tun0',
  '--point',
  'egress=10.244.1.10:eth0',
  '--point',
  'backend=10.244.2.5:eth0',
];

/** A collector with a fake hub; `silentBackend` makes the backend agent never answer. */
async function collector(
  t: { teardown(fn: () => Promise<void> | void): void },
  o: { silentBackend?: boolean } = {},
): Promise<RunningCollector> {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-cli-'));
  const hub = twoNodeHub();
  answerWithReplay(hub, PCAP, o.silentBackend === true ? ['backend'] : []);
  const c = await startCollector({
    port: 0,
    dataDir: dir,
    tokens: [TOKEN],
    logger: silentLogger(),
    hubFactory: () => hub,
    fsync: false,
    debounceMs: 0,
  });
  t.teardown(async () => {
    await c.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return c;
}

function capture(argv: string[], env: NodeJS.ProcessEnv = ENV) {
  const out: string[] = [];
  const err: string[] = [];
  const run = runCapture(argv, (l) => out.push(l), { err: (l) => err.push(l), env, pollMs: 20 });
  return { out, err, run };
}

void t.test('parses NAME=[NODE/]TARGET:IFACE', (t) => {
  t.same(parseCapturePoint('decap=10.244.1.10:tun0'), {
    name: 'decap',
    target: '10.244.1.10',
    iface: 'tun0',
  });
  t.same(parseCapturePoint('egress=vpn-node//run/netns/vpn:eth0'), {
    name: 'egress',
    target: '/run/netns/vpn',
    iface: 'eth0',
    node: 'vpn-node',
  });
  t.same(parseCapturePoint('backend=/proc/123/ns/net:eth0'), {
    name: 'backend',
    target: '/proc/123/ns/net',
    iface: 'eth0',
  });
  t.same(parseCapturePoint('backend=node-2/4242:any'), {
    name: 'backend',
    target: '4242',
    iface: 'any',
    node: 'node-2',
  });
  t.same(parseCapturePoint('backend=[fd00::5]:eth0'), {
    name: 'backend',
    target: 'fd00::5',
    iface: 'eth0',
  });
  t.same(parseCapturePoint('backend=n1/[fd00::5]:eth0'), {
    name: 'backend',
    target: 'fd00::5',
    iface: 'eth0',
    node: 'n1',
  });
  for (const bad of [
    'decap',
    'decap=10.244.1.10',
    'Decap=1.2.3.4:eth0',
    'decap=fd00::5:eth0',
    'decap=[1.2.3.4]:eth0',
    'decap=foo:eth0',
    'decap=1.2.3.4:',
  ]) {
    t.throws(() => parseCapturePoint(bad), { code: 'CLI_BAD_POINT' }, bad);
  }
  t.equal(parseDuration('30s', '--timeout'), 30_000);
  t.equal(parseDuration('500ms', '--timeout'), 500);
  t.equal(parseDuration('2m', '--timeout'), 120_000);
  t.equal(parseDuration('1.5', '--timeout'), 1500);
  t.throws(() => parseDuration('soon', '--timeout'), { code: 'CLI_USAGE' });
  t.same(parseListen('0.0.0.0:7070'), { host: '0.0.0.0', port: 7070 });
  t.same(parseListen('[::1]:0'), { host: '::1', port: 0 });
  // ':7070' used to bind every address silently (issue 17): which one must be said.
  t.throws(() => parseListen(':7070'), { code: 'CLI_USAGE' });
  t.throws(() => parseListen('7070'), { code: 'CLI_USAGE' });
  t.end();
});

void t.test('capture → progress on stderr, verdict and report URL on stdout, exit 0', async (t) => {
  const c = await collector(t);
  const { out, err, run } = capture([
    '--collector',
    c.url,
    ...POINT_ARGS,
    '--client',
    '141.142.228.5',
  ]);
  t.equal(await run, 0);
  t.match(err[0], /^capture c-\S+ armed on http:\/\/127\.0\.0\.1:\d+/);
  t.ok(
    err.some((l) => /decap: \w+ \d+ pkts drops unknown/.test(l)),
    'drops shown as unknown',
  );
  const text = out.join('\n');
  t.match(text, /: resolved \(preserved, and the reply came back/);
  t.match(text, /verdict: preserved/);
  t.match(text, new RegExp(`report: ${c.url}/v1/captures/c-\\S+/report\\.md`));
  // The command that repeats it, from report.json: the collector's URL, a token placeholder.
  t.match(
    text,
    new RegExp(
      `\\nagain: {2}hoptrace capture --point decap=\\S+ .*--collector ${c.url} --token-file TOKEN_FILE --client 141\\.142\\.228\\.5 `,
    ),
  );
});

void t.test(
  '--evidence-payload: asked of the collector and in the command that repeats it',
  async (t) => {
    const c = await collector(t);
    const { out, run } = capture(['--collector', c.url, ...POINT_ARGS, '--evidence-payload']);
    t.equal(await run, 0);
    const again = out.find((l) => l.startsWith('again:')) ?? '';
    t.match(again, / --evidence-payload$/, `the Reproduce line keeps it: ${again}`);
    const plain = capture(['--collector', c.url, ...POINT_ARGS]);
    t.equal(await plain.run, 0);
    t.notMatch(plain.out.find((l) => l.startsWith('again:')) ?? '', /--evidence-payload/);
  },
);

void t.test(
  '--doctor-tunnel-range: asked of the collector and in the command that repeats it',
  async (t) => {
    const c = await collector(t);
    const { out, run } = capture([
      '--collector',
      c.url,
      ...POINT_ARGS,
      '--doctor-tunnel-range',
      '10.90.0.0/24',
    ]);
    t.equal(await run, 0);
    const again = out.find((l) => l.startsWith('again:')) ?? '';
    t.match(
      again,
      / --doctor-tunnel-range 10\.90\.0\.0\/24$/,
      `the Reproduce line keeps it: ${again}`,
    );
    await t.rejects(
      capture(['--collector', c.url, ...POINT_ARGS, '--doctor-tunnel-range', '10.90.0.0/33']).run,
      { code: 'CLI_USAGE', where: '--doctor-tunnel-range' },
    );
  },
);

void t.test('a point whose pod target came from an old list is named when armed', (t) => {
  const point = { name: 'decap', target: 'vpn/wg-0' };
  const note = 'reading vpn/wg-0 from the API failed (HTTP 503): as listed 42 s ago';
  t.same(
    targetNoteLines({
      points: [
        { ...point, targetNote: note } as CaptureView['points'][number],
        { name: 'backend', target: '10.244.2.5' } as CaptureView['points'][number],
      ],
    }),
    [`  decap: target vpn/wg-0 taken from an old pod list: ${note}`],
  );
  t.end();
});

void t.test('--json prints one object with the capture and the analysis', async (t) => {
  const c = await collector(t);
  const { out, run } = capture(['--collector', c.url, ...POINT_ARGS, '--json']);
  t.equal(await run, 0);
  t.equal(out.length, 1);
  t.match(JSON.parse(out[0] ?? ''), {
    capture: { state: 'resolved', verdict: { layer: 'preserved' } },
    analysis: {
      verdict: { layer: 'preserved' },
      points: [{ name: 'decap' }, { name: 'egress' }, { name: 'backend' }],
    },
  });
});

void t.test('a backend that never answers: timeout, the verdict names it, exit 3', async (t) => {
  const c = await collector(t, { silentBackend: true });
  const { out, run } = capture([
    '--collector',
    c.url,
    ...POINT_ARGS,
    '--timeout',
    '600ms',
    '--settle',
    '60s',
  ]);
  t.equal(await run, 3);
  const text = out.join('\n');
  t.match(text, /: timeout \(timeout after 600 ms\)/);
  t.match(text, /verdict: unknown/);
  t.match(text, /no events from backend/);
});

void t.test('refused token, unreachable collector, bad flags: clear errors', async (t) => {
  const c = await collector(t);
  await t.rejects(capture(['--collector', c.url, ...POINT_ARGS], { HOPTRACE_TOKEN: 'wrong' }).run, {
    code: 'API_UNAUTHORIZED',
    message: /refused the token/,
  });
  // A port that was just free: nothing listens there.
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((r) =>
    srv.close(() => {
      r();
    }),
  );
  await t.rejects(capture(['--collector', `http://127.0.0.1:${port}`, ...POINT_ARGS]).run, {
    code: 'COLLECTOR_UNREACHABLE',
    message: /hoptrace collector/,
  });
  await t.rejects(capture(['--collector', c.url, '--point', 'decap=1.2.3.4:eth0']).run, {
    code: 'CLI_USAGE',
  });
  await t.rejects(capture(['--collector', 'ftp://x', ...POINT_ARGS]).run, { code: 'CLI_USAGE' });
  await t.rejects(capture(['--collector', c.url, ...POINT_ARGS, '--bogus']).run, {
    code: 'CLI_USAGE',
  });
  await t.rejects(capture(['--collector', c.url, ...POINT_ARGS], {}).run, {
    code: 'AUTH_NO_TOKEN',
  });
  // The API's own validation comes back with its code.
  await t.rejects(
    capture(['--collector', c.url, ...POINT_ARGS, '--client', '1.2.3.4', '--dst', '1.2.3.4:99999'])
      .run,
    {
      code: 'CLI_USAGE',
    },
  );
});

void t.test('hoptrace collector: starts from flags, stops on abort', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-coll-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, `${TOKEN}\n`);
  const ac = new AbortController();
  const out: string[] = [];
  let url = '';
  const code = runCollector(
    [
      '--listen',
      '127.0.0.1:0',
      '--data-dir',
      join(dir, 'data'),
      '--token-file',
      tokenFile,
      '--log-level',
      'silent',
    ],
    (l) => out.push(l),
    {
      env: {},
      signal: ac.signal,
      overrides: { hubFactory: () => new FakeHub() },
      onReady: (c) => {
        url = c.url;
        void fetch(`${c.url}/v1/agents`, { headers: { authorization: `Bearer ${TOKEN}` } })
          .then((r) => {
            t.equal(r.status, 200, 'the API answers with the token file token');
            return r.json();
          })
          .then((j) => {
            t.same(j, { agents: [] });
            ac.abort();
          });
      },
    },
  );
  t.equal(await code, 0);
  t.match(out[0], /^collector collector-[0-9a-f]+ listening on http:\/\/127\.0\.0\.1:\d+/);
  t.ok(url !== '');
  await t.rejects(
    runCollector(['--listen', 'nope'], () => undefined, { env: ENV }),
    { code: 'CLI_USAGE' },
  );
  await t.rejects(
    runCollector([], () => undefined, { env: {} }),
    { code: 'AUTH_NO_TOKEN' },
  );
  try {
    await runCollector(['--log-level', 'loud'], () => undefined, { env: ENV });
    t.fail('should throw');
  } catch (e) {
    t.ok(isHoptraceError(e) && e.code === 'CLI_USAGE');
  }
});

/**
 * `hoptrace capture`, `doctor --collector` and cluster `repro` against a collector on loopback that
 * answers with another shape (cli/collector-replies.ts): `{}`, `[]`, `{"id": 5}`, a state no
 * collector has, a view without the members the command reads, an analysis without its verdict, a
 * capture that never ends. Each ends with COLLECTOR_BAD_RESPONSE naming the request and what is
 * wrong, in bounded time — never a TypeError, a stack trace or a wait for ever. The kubectl
 * plugin's forms of the same commands: kubectl-faults.test.ts.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { runCapture, type CaptureDeps } from '../../cli/capture';
import { runDoctor } from '../../cli/doctor';
import { runClusterRepro, type ClusterReproOptions } from '../../cli/repro';
import { isHoptraceError } from '../../common/errors';

type Test = Pick<typeof t, 'ok' | 'equal' | 'match' | 'teardown'>;

const BIN = join(__dirname, '..', '..', '..', 'bin', 'hoptrace');
const TOKEN = 'replies-token';
/** Longer than any answer here takes: a command still running then is hanging. */
const HANG_MS = 10_000;

type Answer = (method: string, path: string) => unknown;

/** A collector on loopback answering every request with `answer(method, path)` as JSON, 200. */
async function fakeCollector(
  t: Test,
  answer: Answer,
): Promise<{ url: string; seen: IncomingMessage[] }> {
  const seen: IncomingMessage[] = [];
  const srv = createServer((req, res) => {
    seen.push(req);
    req.resume();
    req.on('end', () => {
      const text = JSON.stringify(answer(req.method ?? 'GET', req.url ?? '/'));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    srv.closeAllConnections();
    srv.close();
  });
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, seen };
}

/** What `run` ended with: its error, 'resolved', or 'hung' past HANG_MS. */
async function ending(run: Promise<unknown>): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<string>((resolve) => {
    timer = setTimeout(() => {
      resolve('hung');
    }, HANG_MS);
  });
  try {
    return await Promise.race([
      run.then(
        () => 'resolved',
        (e: unknown) => e,
      ),
      hung,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** `run` ends with COLLECTOR_BAD_RESPONSE matching `want`, and with nothing else. */
async function badResponse(t: Test, name: string, run: Promise<unknown>, want: RegExp) {
  const e = await ending(run);
  t.ok(
    isHoptraceError(e),
    `${name}: a coded error, not ${e instanceof Error ? e.stack : String(e)}`,
  );
  if (!isHoptraceError(e)) return;
  t.equal(e.code, 'COLLECTOR_BAD_RESPONSE', `${name}: ${e.message}`);
  t.match(e.message, want, name);
  t.match(e.hint, /hoptrace collector of this command's version/, `${name}: what to check`);
}

// ---- hoptrace capture ----

const CAPTURE_ID = 'c-mb2x8k1a-0123abcd';
const POINTS = ['--point', 'decap=10.244.1.10:tun0', '--point', 'backend=10.244.2.5:eth0'];

/** A capture view as the collector serves it, with `over` changed. */
function captureView(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: CAPTURE_ID,
    state: 'capturing',
    createdAt: '2026-12-02T04:39:48.000Z',
    points: [
      {
        name: 'decap',
        target: '10.244.1.10',
        state: 'capturing',
        packets: 3,
        kernelDrops: 0,
        lost: 0,
        queueDrops: 0,
      },
    ],
    progress: { requestSeen: false, layer: null },
    verdict: null,
    finalReason: null,
    reportUrls: null,
    ...over,
  };
}

const FINAL = {
  state: 'resolved',
  finalReason: 'settled',
  reportUrls: {
    markdown: `/v1/captures/${CAPTURE_ID}/report.md`,
    json: `/v1/captures/${CAPTURE_ID}/report.json`,
  },
};

function capture(url: string, extra: string[] = [], deps: Partial<CaptureDeps> = {}) {
  return runCapture(['--collector', url, ...POINTS, ...extra], () => undefined, {
    err: () => undefined,
    env: { HOPTRACE_TOKEN: TOKEN },
    pollMs: 10,
    ...deps,
  });
}

void t.test('capture: a capture view of another shape', async (t) => {
  const cases: [string, unknown, RegExp][] = [
    [
      '{}',
      {},
      /POST http:\/\/127\.0\.0\.1:\d+\/v1\/captures: not a capture view .*: id is missing/,
    ],
    ['[]', [], /not a capture view .*: the reply is not an object/],
    ['{"id": 5}', { id: 5 }, /id is not a capture id/],
    ['{"state": "x"}', { state: 'x' }, /id is missing/],
    ['a state no collector has', captureView({ state: 'x' }), /state is not one of arming, /],
    ['an id that is a path', captureView({ id: '../../v1/agents' }), /id is not a capture id/],
    ['points missing', captureView({ points: undefined }), /: points is missing/],
    [
      'a point without its counts',
      captureView({ points: [{ name: 'decap', target: 'x', state: 'capturing' }] }),
      /points\[0\]\.packets is missing/,
    ],
    ['progress null', captureView({ progress: null }), /progress is not an object/],
    [
      'a final view without reportUrls',
      captureView({ ...FINAL, reportUrls: undefined }),
      /reportUrls is missing/,
    ],
  ];
  for (const [name, reply, want] of cases) {
    const c = await fakeCollector(t, () => reply);
    await badResponse(t, name, capture(c.url), want);
  }
});

void t.test('capture: report.json of another shape', async (t) => {
  const cases: [string, unknown, RegExp][] = [
    ['{}', {}, /GET \S+\/report\.json: not an analysis .*: verdict is missing/],
    ['[]', [], /not an analysis .*: the reply is not an object/],
    [
      'a verdict with its layer only',
      { verdict: { layer: 'preserved' }, points: [] },
      /verdict\.rewrittenBetween is missing/,
    ],
    [
      'a layer no analysis names',
      {
        verdict: { layer: 'x', rewrittenBetween: null, client: null, evidence: [], hint: '' },
        points: [],
      },
      /verdict\.layer is not one of preserved, /,
    ],
    [
      'a time a Date cannot hold',
      {
        verdict: { layer: 'dropped', rewrittenBetween: null, client: null, evidence: [], hint: '' },
        points: [{ name: 'decap', observed: null, firstTsNs: '9'.repeat(22) }],
      },
      /points\[0\]\.firstTsNs is not a time in ns/,
    ],
  ];
  for (const [name, analysis, want] of cases) {
    const c = await fakeCollector(t, (_m, path) =>
      path.endsWith('/report.json') ? analysis : captureView(FINAL),
    );
    await badResponse(t, name, capture(c.url), want);
  }
});

void t.test('capture: the report is fetched from the capture, never from elsewhere', async (t) => {
  const elsewhere = await fakeCollector(t, () => ({}));
  const c = await fakeCollector(t, () =>
    captureView({
      ...FINAL,
      reportUrls: { markdown: FINAL.reportUrls.markdown, json: `${elsewhere.url}/steal` },
    }),
  );
  await badResponse(
    t,
    'reportUrls.json on another host',
    capture(c.url),
    /reportUrls\.json 'http:\/\/127\.0\.0\.1:\d+\/steal' is not a path under \/v1\/captures\/c-mb2x8k1a-0123abcd\//,
  );
  t.same(
    elsewhere.seen.map((r) => r.headers.authorization),
    [],
    'the token went nowhere else',
  );
});

void t.test('capture: a poll that answers for another capture', async (t) => {
  const c = await fakeCollector(t, (method) =>
    method === 'POST' ? captureView() : captureView({ id: 'c-mb2x8k1a-99999999' }),
  );
  await badResponse(
    t,
    'another id',
    capture(c.url),
    /GET \S+\/v1\/captures\/c-mb2x8k1a-0123abcd: not a capture view .* of c-mb2x8k1a-0123abcd: its id is c-mb2x8k1a-99999999/,
  );
});

void t.test(
  'capture: a capture the collector never ends is given up past its timeout',
  async (t) => {
    const c = await fakeCollector(t, () => captureView());
    const started = Date.now();
    await badResponse(
      t,
      'capturing for ever',
      capture(c.url, ['--timeout', '100ms', '--settle', '50ms'], { finishGraceMs: 200 }),
      /capture c-mb2x8k1a-0123abcd is still capturing 0\.\d s after it was armed with a 0\.1 s timeout/,
    );
    const took = Date.now() - started;
    t.ok(
      took >= 350 && took < 5000,
      `past timeout, settle and grace, and not much more (${took} ms)`,
    );
    t.ok(c.seen.length > 3, 'it was polled meanwhile');
  },
);

// ---- hoptrace doctor --collector ----

function tokenFile(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-replies-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const f = join(dir, 'token');
  writeFileSync(f, TOKEN);
  return f;
}

const FINDING = {
  severity: 'error',
  check: 'return-route',
  node: 'backend-node',
  namespace: '',
  subject: 'route to 10.90.0.1',
  detail: 'via 10.244.1.99, which no namespace holds',
  fix: 'ip route replace 10.90.0.0/24 via 10.244.1.10',
};

void t.test('doctor --collector: a doctor report of another shape', async (t) => {
  const file = tokenFile(t);
  const argv = (url: string): string[] => [
    '--collector',
    url,
    '--vpn',
    '10.244.1.10',
    '--backend',
    '10.244.2.5',
    '--token-file',
    file,
  ];
  const cases: [string, unknown, RegExp][] = [
    ['{}', {}, /POST \S+\/v1\/doctor: not a doctor report .*: tunnelRange is not a string/],
    ['[]', [], /the top level is not an object/],
    ['{"id": 5}', { id: 5 }, /tunnelRange is not a string/],
    [
      'a finding without its fields',
      { tunnelRange: '10.90.0.0/24', client: '10.90.0.1', findings: [{}] },
      /findings\[0\]\.node is not a string/,
    ],
  ];
  for (const [name, reply, want] of cases) {
    const c = await fakeCollector(t, () => reply);
    await badResponse(
      t,
      name,
      runDoctor(argv(c.url), () => undefined),
      want,
    );
  }
  // Without a summary, or with one that says less than the findings: counted from the findings.
  for (const summary of [undefined, { errors: 0, warnings: 0, ok: 0 }]) {
    const c = await fakeCollector(t, () => ({
      tunnelRange: '10.90.0.0/24',
      client: '10.90.0.1',
      findings: [FINDING],
      summary,
    }));
    const out: string[] = [];
    t.equal(await runDoctor(argv(c.url), (l) => out.push(l)), 4, 'the error finding: exit 4');
    t.match(out.join('\n'), /: 1 error\(s\), 0 warning\(s\), 0 ok/);
  }
});

// ---- hoptrace repro --collector ----

const REPRO_ID = 'r-mb2x8k1a-0123abcd';
const capturingPoint = (name: string) => ({ name, state: 'capturing' });

function reproView(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: REPRO_ID,
    state: 'running',
    backend: capturingPoint('backend'),
    attachments: [
      {
        pod: { name: 'wg-0', ip: '10.244.1.10', node: 'vpn-node' },
        points: [capturingPoint('decap'), capturingPoint('egress')],
      },
    ],
    marks: [],
    timeline: [],
    summary: null,
    ...over,
  };
}

function repro(url: string): Promise<unknown> {
  const o: ClusterReproOptions = {
    collector: url,
    token: TOKEN,
    workload: { namespace: 'vpn', labelSelector: 'app=wg' },
    backend: { target: '10.244.2.5', iface: 'eth0' },
    decapIface: 'wg0',
    egressIface: 'eth0',
    client: '127.0.0.1',
    // Nothing listens there: each probe fails at once, which is not what is tested.
    url: `${url.replace(/:\d+$/, ':1')}/probe`,
    deleteAfter: null,
    intervalMs: 10,
    count: 2,
    maxTimeMs: 500,
    armWaitMs: 100,
    settleMs: 0,
  };
  return runClusterRepro(o, () => undefined);
}

void t.test('repro --collector: a repro view of another shape', async (t) => {
  const cases: [string, Answer, RegExp][] = [
    ['{}', () => ({}), /POST \S+\/v1\/repros: not a repro view .*: id is missing/],
    ['[]', () => [], /the reply is not an object/],
    ['{"id": 5}', () => ({ id: 5 }), /id is not a repro id/],
    [
      'the backend point missing while arming',
      (m) =>
        m === 'POST'
          ? reproView({ backend: { name: 'backend', state: 'arming' } })
          : {
              id: REPRO_ID,
            },
      /GET \S+\/v1\/repros\/r-mb2x8k1a-0123abcd: not a repro view .*: backend is missing/,
    ],
    [
      'a mark at a time a Date cannot hold',
      (m, path) =>
        m === 'POST' && path === '/v1/repros'
          ? reproView()
          : reproView({ marks: [{ kind: 'note', atMs: 1e300, detail: 'x' }] }),
      /marks\[0\]\.atMs is not a time in ms/,
    ],
    [
      'a probe verdict no repro names',
      (m, path) =>
        m === 'POST' && path === '/v1/repros'
          ? reproView()
          : reproView({
              timeline: [
                {
                  probeId: 'p1',
                  startedAtMs: 0,
                  servedBy: null,
                  verdict: 'x',
                  ok: false,
                  backendSrc: null,
                },
              ],
            }),
      /timeline\[0\]\.verdict is not one of preserved, .*not-captured/,
    ],
    [
      'another repro',
      (m, path) =>
        m === 'POST' && path === '/v1/repros'
          ? reproView()
          : reproView({ id: 'r-mb2x8k1a-99999999' }),
      /POST \S+\/v1\/repros\/r-mb2x8k1a-0123abcd\/probes: not a repro view .* of r-mb2x8k1a-0123abcd: its id is r-mb2x8k1a-99999999/,
    ],
  ];
  for (const [name, answer, want] of cases) {
    const c = await fakeCollector(t, answer);
    await badResponse(t, name, repro(c.url), want);
  }
});

// ---- The commands as a user runs them: one coded line, exit 1 ----

function hoptrace(argv: string[]): Promise<{ code: number | null; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [BIN, ...argv], {
      env: { ...process.env, HOPTRACE_TOKEN: TOKEN },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    p.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), HANG_MS);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, ms: Date.now() - started });
    });
  });
}

void t.test('hoptrace capture, doctor, repro: exit 1 and one coded line', async (t) => {
  const c = await fakeCollector(t, () => ({ id: 5 }));
  const runs: [string, string[]][] = [
    ['capture', ['capture', '--collector', c.url, ...POINTS]],
    ['doctor', ['doctor', '--collector', c.url, '--vpn', '10.244.1.10', '--backend', '10.244.2.5']],
    [
      'repro',
      [
        'repro',
        '--collector',
        c.url,
        '--vpn-workload',
        'vpn/app=wg',
        '--backend',
        '10.244.2.5:eth0',
        '--decap-iface',
        'wg0',
        '--egress-iface',
        'eth0',
        '--client',
        '127.0.0.1',
        '--url',
        'http://127.0.0.1:1/probe',
      ],
    ],
  ];
  for (const [name, argv] of runs) {
    const r = await hoptrace(argv);
    t.equal(r.code, 1, `${name}: exit 1 (${r.stderr})`);
    t.match(
      r.stderr,
      /^hoptrace: COLLECTOR_BAD_RESPONSE: (POST|GET) http:\/\/127\.0\.0\.1:\d+\/v1\//,
    );
    t.equal(r.stderr.trimEnd().split('\n').length, 1, `${name}: one line`);
    t.notMatch(r.stderr, /TypeError|internal error|\n\s+at /, `${name}: no stack`);
  }
});

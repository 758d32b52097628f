/** The CLI as a user runs it: exit codes, clear errors without stack traces, JSON shape. */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { PCAPS } from './corpus';

const root = join(__dirname, '..', '..', '..');
const bin = join(root, 'bin', 'hoptrace');
const pcaps = PCAPS;
const httpGet = join(pcaps, 'zeek_http-get.pcap');

// Each point is its own capture (one file given for two points is CLI_BAD_POINT): the points
// after the first read copies of it.
const copies = mkdtempSync(join(tmpdir(), 'hoptrace-cli-copies-'));
t.teardown(() => {
  rmSync(copies, { recursive: true, force: true });
});
function copyOf(point: string): string {
  const f = join(copies, `${point}.pcap`);
  copyFileSync(httpGet, f);
  return f;
}

function hoptrace(...args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

void t.test('help and unknown commands', (t) => {
  t.equal(hoptrace('help').code, 0);
  t.match(hoptrace('help').stdout, /analyze --point NAME=FILE/);
  const r = hoptrace('frobnicate');
  t.equal(r.code, 2);
  t.match(r.stderr, /CLI_USAGE: unknown command 'frobnicate'/);
  t.end();
});

void t.test('bad input gets a clear error, never a stack trace', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-cli-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const badInv = join(dir, 'inv.json');
  writeFileSync(badInv, '{"nodes": {"n1": ["not-an-ip"]}}');
  const typoInv = join(dir, 'typo.json');
  writeFileSync(typoInv, '{"node": {"n1": ["10.0.0.1"]}}');
  const aFile = join(dir, 'a-file');
  writeFileSync(aFile, 'x');
  const token = join(dir, 'token');
  writeFileSync(token, 'secret-token-for-the-test\n');
  const garbage = join(dir, 'garbage.pem');
  writeFileSync(garbage, 'not a certificate\n');
  const two = ['--point', 'a=' + httpGet, '--point', 'b=' + copyOf('b')];
  const cases: [string[], RegExp][] = [
    [['analyze', '--point', 'decap=' + httpGet], /CLI_USAGE: .*at least two capture points/],
    [
      ['analyze', '--point', 'decap', '--point', 'b=x'],
      /CLI_BAD_POINT: --point: 'decap' is not NAME=FILE/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'a=' + httpGet],
      /CLI_BAD_POINT: .*given twice/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'b=' + copyOf('b'), '--bogus'],
      /CLI_USAGE: hoptrace analyze: .*bogus/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'b=' + copyOf('b'), '--client', 'x'],
      /CLI_USAGE: --client: 'x' is not an IP/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'b=' + copyOf('b'), '--inventory', badInv],
      /CLI_BAD_INVENTORY: .*inv\.json: nodes\["n1"\]\[0\] is not an IP address/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'b=' + join(dir, 'missing.pcap')],
      /FILE_NOT_FOUND: .*missing\.pcap/,
    ],
    [
      [
        'analyze',
        '--point',
        'a=' + httpGet,
        '--point',
        'b=' + join(pcaps, 'libpcap_pcap-invalid-version-1.pcap'),
      ],
      /FILE_BAD_VERSION: .*invalid-version-1\.pcap/,
    ],
    [
      ['decode', join(pcaps, 'libpcap_shb-option-too-long.pcapng')],
      /FILE_BAD_BLOCK: .*shb-option-too-long\.pcapng/,
    ],
    [['decode'], /CLI_USAGE/],
    // Issue 17: each was a stack trace, a hang at 100 % CPU or a silently empty inventory.
    [['decode', dir], /FILE_NOT_FOUND: .*it is a directory, not a capture file/],
    [['analyze', ...two, '--inventory', typoInv], /CLI_BAD_INVENTORY: .*unknown key "node"/],
    [
      ['analyze', ...two, '--report-dir', '/proc/x'],
      /FILE_WRITE: --report-dir: \/proc\/x is inside \/proc, a proc filesystem/,
    ],
    [
      ['analyze', ...two, '--report-dir', aFile],
      /FILE_WRITE: --report-dir: cannot create the directory/,
    ],
    [
      ['collector', '--data-dir', '/proc/x', '--token-file', token],
      /STORE_IO: --data-dir: \/proc\/x is inside \/proc/,
    ],
    [
      ['collector', '--listen', ':7070', '--token-file', token],
      /CLI_USAGE: --listen: ':7070' names no address/,
    ],
    [
      [
        'collector',
        '--listen',
        '127.0.0.1:0',
        '--data-dir',
        join(dir, 'data'),
        '--token-file',
        token,
        '--tls-cert',
        garbage,
        '--tls-key',
        garbage,
      ],
      /COLLECTOR_TLS: --tls-cert\/--tls-key: .*PEM/,
    ],
    [
      // Taken silently before: every handshake then failed as "unreachable" (issue 17).
      [
        'agent',
        '--collector',
        'wss://127.0.0.1:1/v1/agents',
        '--token-file',
        token,
        '--ca',
        garbage,
      ],
      /AGENT_TLS: --ca: .*garbage\.pem: no PEM certificate in it/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'b=' + copyOf('b'), '--drops', 'b=-1'],
      /CLI_USAGE: --drops: 'b=-1' is not NAME=N .*packets dropped by kernel/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'b=' + copyOf('b'), '--drops', 'c=0'],
      /CLI_BAD_POINT: --drops: --drops names 'c', which is not a point .*the points are a, b/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'b=' + copyOf('b')].concat([
        '--drops',
        'b=1',
        '--drops',
        'b=2',
      ]),
      /CLI_BAD_POINT: --drops: --drops for 'b' is given twice/,
    ],
    [
      ['analyze', '--point', 'a=' + httpGet, '--point', 'b=' + copyOf('b'), '--parallel', 'always'],
      /CLI_USAGE: --parallel: 'always' is not auto, on or off/,
    ],
    // node:util parseArgs's own words were several lines about positional arguments and '--'.
    [
      ['analyze', '--bogus'],
      /^hoptrace: CLI_USAGE: hoptrace analyze: unknown flag '--bogus' \(usage/,
    ],
    [
      ['capture', '--timeout', '-5'],
      /^hoptrace: CLI_USAGE: hoptrace capture: '--timeout' needs a value; for one that starts with '-', write --timeout=VALUE \(usage/,
    ],
    [
      ['analyze', ...two, '--json=1'],
      /^hoptrace: CLI_USAGE: hoptrace analyze: '--json' takes no value/,
    ],
    [['analyze', '--point'], /^hoptrace: CLI_USAGE: hoptrace analyze: '--point' needs a value \(/],
    [['frobnicate'], /^hoptrace: CLI_USAGE: unknown command 'frobnicate'/],
  ];
  for (const [args, re] of cases) {
    const r = hoptrace(...args);
    t.not(r.code, 0, `${args.join(' ')} fails`);
    t.match(r.stderr, re, `${args.join(' ')} explains`);
    t.notMatch(r.stderr, /\n\s+at /, `${args.join(' ')} prints no stack trace`);
  }
  t.end();
});

void t.test('analyze --parallel on|off|auto: the same answer every way', (t) => {
  const three = ['decap', 'egress', 'backend'].flatMap((p) => [
    '--point',
    p === 'decap' ? `decap=${httpGet}` : `${p}=${copyOf(p)}`,
  ]);
  const runs = ['on', 'off', 'auto'].map((p) => {
    const r = hoptrace('analyze', ...three, '--client', '141.142.228.5', '--json', '--parallel', p);
    t.equal(r.code, 0, `--parallel ${p}: ${r.stderr}`);
    return r.stdout;
  });
  t.equal(runs[0], runs[1], 'on and off');
  t.equal(runs[2], runs[1], 'auto and off');
  t.end();
});

void t.test('analyze: the same capture at every point is a preserved source', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-cli-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const r = hoptrace(
    'analyze',
    '--point',
    `decap=${httpGet}`,
    '--point',
    `egress=${copyOf('egress')}`,
    '--point',
    `backend=${copyOf('backend')}`,
    '--client',
    '141.142.228.5',
    '--drops',
    'backend=3',
    '--json',
    '--report-dir',
    dir,
  );
  t.equal(r.code, 0, r.stderr);
  t.match(
    JSON.parse(r.stdout),
    {
      captureHealth: [
        { point: 'decap', kernelDrops: null },
        {},
        { point: 'backend', kernelDrops: 3, dropsGiven: true },
      ],
    },
    "--drops reaches the backend point's capture health",
  );
  const out = JSON.parse(r.stdout) as {
    verdict: {
      layer: string;
      rewrittenBetween: unknown;
      observed: Record<string, { src: string; sport: number }>;
    };
    points: unknown[];
  };
  t.equal(out.verdict.layer, 'preserved');
  t.equal(out.verdict.rewrittenBetween, null);
  t.equal(out.verdict.observed['backend']?.src, '141.142.228.5');
  t.equal(out.verdict.observed['backend']?.sport, 59856);
  t.equal(out.points.length, 3);
  const md = readFileSync(join(dir, 'report.md'), 'utf8');
  t.match(md, /preserved/);
  const saved = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as {
    verdict: { layer: string };
  };
  t.equal(saved.verdict.layer, 'preserved');
  t.end();
});

void t.test('analyze: no request from the given client is the verdict unknown, exit 3', (t) => {
  const r = hoptrace(
    'analyze',
    '--point',
    `decap=${httpGet}`,
    '--point',
    `backend=${copyOf('backend')}`,
    '--client',
    '10.1.2.3',
  );
  t.equal(r.code, 3, r.stderr);
  t.match(
    r.stdout,
    /^verdict: unknown .*\n {2}why: {4}no new TCP connection .* from client 10\.1\.2\.3/,
  );
  t.equal(r.stderr, '');
  t.end();
});

void t.test('decode --json prints one object per frame with the documented keys', (t) => {
  const r = hoptrace('decode', '--json', httpGet);
  t.equal(r.code, 0, r.stderr);
  const lines = r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  t.equal(lines.length, 14);
  t.same(Object.keys(lines[0]!).slice(0, 7), [
    'frame',
    'time',
    'linktype',
    'layers',
    'outer',
    'inner',
    'truncated',
  ]);
  t.same(lines[0]!['inner'], {
    proto: 'tcp',
    src: '141.142.228.5',
    dst: '192.150.187.43',
    sport: 59856,
    dport: 80,
  });
  t.end();
});

void t.test('analyze: point names that are also names of object properties', (t) => {
  // --drops is looked up by point name: 'constructor' must not find Object's constructor there.
  const r = hoptrace(
    'analyze',
    '--point',
    `constructor=${httpGet}`,
    '--point',
    `tostring=${copyOf('tostring')}`,
    '--point',
    `hasownproperty=${copyOf('hasownproperty')}`,
    '--drops',
    'tostring=2',
    '--json',
  );
  t.equal(r.code, 0, r.stderr);
  const health = (JSON.parse(r.stdout) as { captureHealth: Record<string, unknown>[] })
    .captureHealth;
  t.same(
    health.map((h) => [h.point, h.kernelDrops, 'dropsGiven' in h]),
    [
      ['constructor', null, false],
      ['tostring', 2, true],
      ['hasownproperty', null, false],
    ],
  );
  t.end();
});

void t.test('doctor on namespaces it cannot open: error findings and exit 4, never "ok"', (t) => {
  const r = hoptrace(
    'doctor',
    '--netns',
    'vpn=/nonexistent/vpn',
    '--netns',
    'vpn-node=/nonexistent/vpn-node',
    '--netns',
    'backend-node=/nonexistent/backend-node',
    '--client',
    '10.90.0.42',
    '--json',
  );
  t.equal(r.code, 4, r.stderr);
  const out = JSON.parse(r.stdout) as {
    findings: { severity: string; check: string; detail: string }[];
    summary: { errors: number; ok: number };
  };
  t.equal(out.summary.ok, 0, 'nothing is ok about a namespace that was not read');
  t.same(
    out.findings.map((f) => `${f.severity} ${f.check}`),
    ['error read', 'error read', 'error read'],
  );
  t.ok(out.findings.every((f) => /could not read this namespace/.test(f.detail)));
  t.end();
});

void t.test('--help and -h on every command, --version, usage errors exit 2 (issue 17)', (t) => {
  for (const cmd of ['decode', 'analyze', 'collector', 'agent', 'capture', 'repro', 'doctor']) {
    for (const flag of ['--help', '-h']) {
      const r = hoptrace(cmd, flag);
      t.equal(r.code, 0, `${cmd} ${flag} exits 0`);
      t.match(r.stdout, new RegExp(`^usage: hoptrace ${cmd} `), `${cmd} ${flag} prints its usage`);
      t.equal(r.stderr, '');
    }
  }
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
  const v = hoptrace('--version');
  t.equal(v.code, 0);
  t.equal(v.stdout, `hoptrace ${pkg.version}\n`);
  for (const args of [
    ['analyze', '--point', `a=${httpGet}`, '--point', `b=${copyOf('b')}`, '--bogus'],
    ['analyze', '--point', 'decap', '--point', 'b=x'],
    ['capture', '--bogus'],
    ['doctor', '--bogus'],
    ['decode'],
  ]) {
    const r = hoptrace(...args);
    t.equal(r.code, 2, `${args.join(' ')}: a usage error exits 2`);
  }
  t.end();
});

void t.test('decode - reads standard input', (t) => {
  const r = spawnSync(process.execPath, [bin, 'decode', '--json', '-'], {
    input: readFileSync(httpGet),
    encoding: 'utf8',
    timeout: 60_000,
  });
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout.trim().split('\n').length, 14, 'every frame of the capture');
  t.end();
});

void t.test('a reader that goes away ends decode quietly (EPIPE), no stack trace', (t) => {
  // A capture long enough to overflow the pipe: the records of zeek_http-get.pcap, 3000 times.
  const file = readFileSync(httpGet);
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-cli-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const big = join(dir, 'big.pcap');
  writeFileSync(
    big,
    Buffer.concat([file, ...Array.from({ length: 3000 }, () => file.subarray(24))]),
  );
  const r = spawnSync(
    'bash',
    ['-c', `set -o pipefail; "${process.execPath}" "${bin}" decode "${big}" | head -n 1`],
    { encoding: 'utf8', timeout: 60_000 },
  );
  t.equal(r.status, 0, `the pipeline succeeds: ${r.stderr}`);
  t.match(r.stdout, /^1 2013-03-07T21:42:06.869344Z ethernet ipv4 tcp /);
  t.equal(r.stderr, '', 'nothing on stderr');
  t.end();
});

void t.test('a full disk under the output is CLI_OUTPUT, exit 1, no stack trace', (t) => {
  // /dev/full fails every write with ENOSPC (a first version threw Node's stack trace).
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-cli-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const copy = join(dir, 'backend.pcap');
  writeFileSync(copy, readFileSync(httpGet));
  for (const args of [
    ['decode', httpGet],
    ['analyze', '--point', `decap=${httpGet}`, '--point', `backend=${copy}`, '--json'],
  ]) {
    const r = spawnSync(
      'bash',
      ['-c', `"${process.execPath}" "${bin}" ${args.map((a) => `"${a}"`).join(' ')} > /dev/full`],
      { encoding: 'utf8', timeout: 60_000 },
    );
    t.equal(r.status, 1, `${args[0]}: exit 1`);
    t.match(
      r.stderr,
      /^hoptrace: CLI_OUTPUT: stdout: standard output could not be written: ENOSPC .*what was written is incomplete/,
      `${args[0]}: the code, what and what to do`,
    );
    t.notMatch(r.stderr, /\n\s+at /, `${args[0]}: no stack trace`);
  }
  t.end();
});

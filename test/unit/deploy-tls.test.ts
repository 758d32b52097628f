/**
 * scripts/deploy-tls.sh: the CA and collector certificate deploy/ mounts. The Secret it prints
 * validates and holds what it wrote; the certificate is the CA's, for the agents' --collector host
 * and a port-forward; a collector serving it is trusted by an agent link given the CA and by
 * `hoptrace capture` given NODE_EXTRA_CA_CERTS (as the README says), and by neither without; a
 * second run keeps the CA.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import t from 'tap';
import { parseAllDocuments } from 'yaml';
import * as coreV1 from 'kubernetes-models/v1';
import { CollectorLink } from '../../agent/link/collector-link';
import { startCollector } from '../../collector/main';
import type { HoptraceError } from '../../common/errors';
import { TOKEN, hello } from './transport-fixtures';

const ROOT = join(__dirname, '..', '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'deploy-tls.sh');
const CLI = join(__dirname, '..', '..', 'cli', 'main.js');

/** The agent's --collector host in deploy/base/agent.yaml. */
function agentCollectorHost(): string {
  const text = readFileSync(join(ROOT, 'deploy', 'base', 'agent.yaml'), 'utf8');
  const m = /wss:\/\/([^:/\s]+)/.exec(text);
  if (m?.[1] === undefined) throw new Error('no wss:// URL in deploy/base/agent.yaml');
  return m[1];
}

function run(out: string): { secret: Record<string, unknown> } {
  const stdout = execFileSync('bash', [SCRIPT, '--out', out], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const docs = parseAllDocuments(stdout, { version: '1.1' });
  return { secret: docs[0]?.toJS() as Record<string, unknown> };
}

/** `hoptrace capture` against `url` with `env`: its exit code and stderr. */
function capture(url: string, env: NodeJS.ProcessEnv): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        CLI,
        'capture',
        '--collector',
        url,
        '--point',
        'a=10.0.0.1:eth0',
        '--point',
        'b=10.0.0.2:eth0',
        '--timeout',
        '1s',
      ],
      { env: { PATH: process.env['PATH'], HOPTRACE_TOKEN: TOKEN, ...env }, timeout: 20_000 },
      (err, _stdout, stderr) => {
        resolve({ code: typeof err?.code === 'number' ? err.code : 0, stderr });
      },
    );
  });
}

void t.test(
  'deploy-tls.sh: the Secret, the certificate, and a collector that serves it',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-deploy-tls-'));

    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const out = join(dir, 'tls');
    const { secret } = run(out);

    t.doesNotThrow(() => {
      new coreV1.Secret(secret).validate();
    }, 'the printed Secret validates');
    t.match(secret, {
      metadata: { name: 'hoptrace-tls', namespace: 'hoptrace' },
      type: 'kubernetes.io/tls',
    });
    const data = secret['data'] as Record<string, string>;
    t.same(Object.keys(data).sort(), ['ca.crt', 'tls.crt', 'tls.key'], 'never the CA key');
    for (const k of Object.keys(data))
      t.equal(
        Buffer.from(data[k] ?? '', 'base64').toString(),
        readFileSync(join(out, k), 'utf8'),
        `${k} is the file it wrote`,
      );
    t.equal(statSync(out).mode & 0o777, 0o700, 'the directory is 0700');
    t.equal(statSync(join(out, 'ca.key')).mode & 0o077, 0, 'ca.key is readable by its owner only');

    const caPem = readFileSync(join(out, 'ca.crt'));
    const certPem = readFileSync(join(out, 'tls.crt'));
    const keyPem = readFileSync(join(out, 'tls.key'));
    const ca = new X509Certificate(caPem);
    const cert = new X509Certificate(certPem);
    t.ok(ca.ca, 'ca.crt is a CA');
    t.notOk(cert.ca, 'tls.crt is not');
    t.ok(cert.verify(ca.publicKey), "tls.crt is signed by the CA's key");
    t.ok(cert.checkPrivateKey(createPrivateKey(keyPem)), 'tls.key is its key');
    t.ok(cert.keyUsage.includes('1.3.6.1.5.5.7.3.1'), 'for TLS servers');
    const host = agentCollectorHost();
    t.equal(host, 'hoptrace-collector.hoptrace.svc');
    for (const name of [host, `${host}.cluster.local`, 'hoptrace-collector', 'localhost'])
      t.equal(cert.checkHost(name), name, `names ${name}`);
    t.equal(cert.checkIP('127.0.0.1'), '127.0.0.1', 'names 127.0.0.1 (port-forward)');
    t.equal(cert.checkHost('other.hoptrace.svc'), undefined, 'and nothing else');

    const collector = await startCollector({
      host: '127.0.0.1',
      port: 0,
      dataDir: join(dir, 'data'),
      tokens: [TOKEN],
      tls: { cert: certPem, key: keyPem },
      logLevel: 'silent',
    });
    t.teardown(() => collector.close());
    const port = Number(new URL(collector.url).port);

    // The agents' host name, verified by TLS itself (servername = the --collector host).
    const authorized = await new Promise<boolean>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, ca: caPem, servername: host }, () => {
        resolve(s.authorized);
        s.end();
      });
      s.once('error', reject);
    });
    t.ok(authorized, `TLS verifies the certificate for ${host} against the CA`);

    const link = new CollectorLink({
      url: `wss://127.0.0.1:${port}/v1/agents`,
      token: TOKEN,
      ca: caPem,
      hello: () => hello('deploy-tls-agent'),
      backoff: { minMs: 10, maxMs: 50 },
    });
    t.teardown(() => link.close());
    await new Promise<void>((resolve) => {
      link.onConnected(() => {
        resolve();
      });
    });
    t.ok(link.stats().connected, 'an agent link with --ca ca.crt connects');

    const untrusting = new CollectorLink({
      url: `wss://127.0.0.1:${port}/v1/agents`,
      token: TOKEN,
      hello: () => hello('no-ca-agent'),
      backoff: { minMs: 10, maxMs: 50 },
    });
    t.teardown(() => untrusting.close());
    const err = await new Promise<HoptraceError>((resolve) => {
      untrusting.onError(resolve);
    });
    t.equal(err.code, 'LINK_UNREACHABLE', 'without the CA: refused');

    // README: NODE_EXTRA_CA_CERTS=…/ca.crt hoptrace capture --collector https://127.0.0.1:7070
    const url = `https://127.0.0.1:${port}`;
    const trusted = await capture(url, { NODE_EXTRA_CA_CERTS: join(out, 'ca.crt') });
    t.match(trusted.stderr, /armed on https:/, 'with NODE_EXTRA_CA_CERTS the CLI arms a capture');
    const refused = await capture(url, {});
    t.match(
      refused.stderr,
      /COLLECTOR_UNREACHABLE.*certificate/i,
      'without it, a certificate error',
    );

    const again = run(out);
    const data2 = again.secret['data'] as Record<string, string>;
    t.equal(data2['ca.crt'], data['ca.crt'], 'a second run keeps the CA');
    t.not(data2['tls.crt'], data['tls.crt'], 'and issues a new certificate');
    t.ok(
      new X509Certificate(readFileSync(join(out, 'tls.crt'))).verify(ca.publicKey),
      'signed by the same CA',
    );
  },
);

void t.test('deploy-tls.sh refuses what is not a name or a number', (t) => {
  for (const args of [['--days', 'x'], ['--namespace', 'Bad_Name'], ['--bogus'], ['--out']]) {
    let status = 0;
    let stderr = '';
    try {
      execFileSync('bash', [SCRIPT, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      const x = e as { status: number; stderr: Buffer };
      status = x.status;
      stderr = x.stderr.toString();
    }
    t.equal(status, 2, `${args.join(' ')}: exit 2`);
    t.match(
      stderr,
      /^deploy-tls: /,
      `${args.join(' ')}: says why (${stderr.split('\n')[0] ?? ''})`,
    );
  }
  t.end();
});

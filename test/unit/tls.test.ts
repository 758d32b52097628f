/**
 * TLS between agent and collector: a collector with a certificate, an agent that trusts its CA;
 * agents identified by client certificates (issue 17, per-agent identity).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CollectorLink } from '../../agent/link/collector-link';
import { startCollector } from '../../collector/main';
import type { HoptraceError } from '../../common/errors';
import { TOKEN, hello } from './transport-fixtures';

function makePki(dir: string): { ca: Buffer; cert: Buffer; key: Buffer } {
  const ssl = (...args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  };
  ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=hoptrace test CA',
  );
  ssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'server.key',
    '-out',
    'server.csr',
    '-subj',
    '/CN=127.0.0.1',
  );
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  ssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '2',
    '-extfile',
    'san.ext',
  );
  const read = (f: string): Buffer => readFileSync(join(dir, f));
  return { ca: read('ca.pem'), cert: read('server.pem'), key: read('server.key') };
}

void t.test(
  'an agent trusting the CA connects over wss; one that does not is refused',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-tls-'));

    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const pki = makePki(dir);
    const collector = await startCollector({
      host: '127.0.0.1',
      port: 0,
      dataDir: join(dir, 'data'),
      tokens: [TOKEN],
      tls: { cert: pki.cert, key: pki.key },
      logLevel: 'silent',
    });
    t.teardown(() => collector.close());
    t.match(collector.agentsUrl, /^wss:\/\/127\.0\.0\.1:\d+\/v1\/agents$/);

    const good = new CollectorLink({
      url: collector.agentsUrl,
      token: TOKEN,
      ca: pki.ca,
      hello: () => hello('tls-agent'),
      backoff: { minMs: 10, maxMs: 50 },
    });
    t.teardown(() => good.close());
    await new Promise<void>((resolve) => {
      good.onConnected(() => {
        resolve();
      });
    });
    t.ok(good.stats().connected, 'connected with the CA');

    const bad = new CollectorLink({
      url: collector.agentsUrl,
      token: TOKEN,
      hello: () => hello('no-ca-agent'),
      backoff: { minMs: 10, maxMs: 50 },
    });
    t.teardown(() => bad.close());
    const err = await new Promise<HoptraceError>((resolve) => {
      bad.onError(resolve);
    });
    t.equal(err.code, 'LINK_UNREACHABLE', 'an untrusted certificate is a connection failure');
    t.match(err.message, /certificate/i, 'and says it is the certificate');
    t.notOk(bad.stats().connected);
  },
);

/** A client certificate for `cn`, issued by the test CA in `dir` (or by a CA of its own). */
function clientCert(dir: string, cn: string, ownCa = false): { cert: Buffer; key: Buffer } {
  const ssl = (...args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  };
  const ca = ownCa ? 'rogue' : 'ca';
  if (ownCa)
    ssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'rogue.key',
      '-out',
      'rogue.pem',
      '-days',
      '2',
      '-subj',
      '/CN=rogue CA',
    );
  ssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    `${cn}.key`,
    '-out',
    `${cn}.csr`,
    '-subj',
    `/CN=${cn}`,
  );
  ssl(
    'x509',
    '-req',
    '-in',
    `${cn}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${cn}.pem`,
    '-days',
    '2',
  );
  return { cert: readFileSync(join(dir, `${cn}.pem`)), key: readFileSync(join(dir, `${cn}.key`)) };
}

void t.test(
  'client certificates: the subject CN is the node; a hello for another node is refused',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'hoptrace-mtls-'));

    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const pki = makePki(dir);
    const collector = await startCollector({
      host: '127.0.0.1',
      port: 0,
      dataDir: join(dir, 'data'),
      tokens: [TOKEN],
      tls: { cert: pki.cert, key: pki.key },
      agentAuth: { clientCa: pki.ca },
      logLevel: 'silent',
    });
    t.teardown(() => collector.close());
    const link = (name: string, node: string, id: { cert: Buffer; key: Buffer } | null) => {
      const l = new CollectorLink({
        url: collector.agentsUrl,
        token: id === null ? TOKEN : '',
        ca: pki.ca,
        ...(id ?? {}),
        hello: () => ({ ...hello(name), node }),
        backoff: { minMs: 10, maxMs: 50 },
      });
      t.teardown(() => l.close());
      return l;
    };
    const a = clientCert(dir, 'node-a');
    const good = link('a-1', 'node-a', a);
    await new Promise<void>((resolve) => {
      good.onConnected(() => {
        resolve();
      });
    });
    const view = collector.hub.agents().find((x) => x.agentId === 'a-1');
    t.same(view?.identity, { method: 'client-cert', subject: 'certificate CN=node-a' });

    const lying = link('a-2', 'node-b', a);
    const e1 = await new Promise<HoptraceError>((resolve) => {
      lying.onError(resolve);
    });
    t.equal(e1.code, 'AUTH_WRONG_NODE', "node-a's certificate cannot speak for node-b");

    const rogue = link('r-1', 'node-a', clientCert(dir, 'node-r', true));
    const e2 = await new Promise<HoptraceError>((resolve) => {
      rogue.onError(resolve);
    });
    t.equal(e2.code, 'AUTH_REFUSED', 'a certificate of another CA is refused (401)');

    const shared = link('s-1', 'node-s', null);
    const e3 = await new Promise<HoptraceError>((resolve) => {
      shared.onError(resolve);
    });
    t.equal(
      e3.code,
      'AUTH_REFUSED',
      'with certificates configured, the shared token is not enough',
    );
    t.same(
      collector.hub.agents().map((x) => x.agentId),
      ['a-1'],
      'only the certified agent is known',
    );
  },
);

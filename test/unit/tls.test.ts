/** TLS between agent and collector: a collector with a certificate, an agent that trusts its CA. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
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

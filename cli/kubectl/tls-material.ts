/**
 * The TLS material install puts in the Secret hoptrace-tls: scripts/deploy-tls.sh of this package
 * (openssl; a CA and the collector's certificate for its Service names and localhost), whose files
 * stay in --tls-dir (ca.key never goes into the cluster; the same dir renews under the same CA).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HoptraceError } from '../../common/errors';

const SCRIPT = join(__dirname, '..', '..', '..', 'scripts', 'deploy-tls.sh');

export interface TlsMaterial {
  'ca.crt': Buffer;
  'tls.crt': Buffer;
  'tls.key': Buffer;
}

export function makeTlsMaterial(dir: string, namespace: string): Promise<TlsMaterial> {
  return new Promise((resolve, reject) => {
    execFile(
      'bash',
      [SCRIPT, '--out', dir, '--namespace', namespace],
      { timeout: 60_000 },
      (e, _stdout, stderr) => {
        if (e !== null) {
          reject(
            new HoptraceError(
              'KUBECTL_INSTALL_FAILED',
              `making the TLS material failed (${stderr.trim() || e.message})`,
              {
                where: SCRIPT,
                hint: 'it needs openssl and bash on this machine, and --tls-dir writable',
              },
            ),
          );
          return;
        }
        try {
          const f = (name: string): Buffer => readFileSync(join(dir, name));
          resolve({ 'ca.crt': f('ca.crt'), 'tls.crt': f('tls.crt'), 'tls.key': f('tls.key') });
        } catch (err) {
          reject(new HoptraceError('KUBECTL_INSTALL_FAILED', String(err), { where: dir }));
        }
      },
    );
  });
}

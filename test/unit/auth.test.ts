import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { bearerToken, loadToken, tokenMatches } from '../../common/auth';
import { isHoptraceError } from '../../common/errors';

void t.test('tokens come from a file (trimmed) or the environment', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-auth-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const file = join(dir, 'token');
  writeFileSync(file, '  s3cret\n');
  t.equal(loadToken({ file }), 's3cret');
  t.equal(loadToken({ env: { HOPTRACE_TOKEN: 'from-env' } }), 'from-env');
  for (const opts of [
    { file: join(dir, 'missing') },
    { env: {} },
    { env: { HOPTRACE_TOKEN: ' ' } },
  ]) {
    try {
      loadToken(opts);
      t.fail('no token accepted');
    } catch (e) {
      t.ok(isHoptraceError(e) && e.code === 'AUTH_NO_TOKEN');
    }
  }
  writeFileSync(file, '\n');
  t.throws(() => loadToken({ file }), { code: 'AUTH_NO_TOKEN' });
  t.end();
});

void t.test('bearer header parsing and comparison', (t) => {
  t.equal(bearerToken('Bearer abc'), 'abc');
  t.equal(bearerToken('bearer  abc '), 'abc');
  t.equal(bearerToken('Basic abc'), undefined);
  t.equal(bearerToken(undefined), undefined);
  t.ok(tokenMatches('abc', ['x', 'abc']));
  t.notOk(tokenMatches('abc', ['abcd']));
  t.notOk(tokenMatches('', ['']));
  t.notOk(tokenMatches(undefined, ['abc']));
  t.notOk(tokenMatches('abc', []));
  t.end();
});

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { ERRORS, HoptraceError, isHoptraceError } from '../../common/errors';

const root = join(__dirname, '..', '..', '..');

void t.test('every error code is documented in README.md', (t) => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  for (const code of Object.keys(ERRORS)) {
    t.ok(readme.includes(`\`${code}\``), `README documents ${code}`);
  }
  t.end();
});

void t.test('HoptraceError says what, where and what to do', (t) => {
  const e = new HoptraceError('FILE_BAD_MAGIC', 'unknown magic 0x01020304', {
    where: 'x.pcap',
    hint: 'give a pcap or pcapng file',
  });
  t.equal(e.code, 'FILE_BAD_MAGIC');
  t.match(
    e.message,
    /^FILE_BAD_MAGIC: x\.pcap: unknown magic 0x01020304 \(give a pcap or pcapng file\)$/,
  );
  t.ok(isHoptraceError(e));
  t.notOk(isHoptraceError(new Error('x')));
  t.end();
});

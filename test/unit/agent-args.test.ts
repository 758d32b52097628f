/**
 * `hoptrace agent`'s flags are checked at start (the reviewer's args.js, args2.js): each bad value
 * ends in its own code and where, never an internal error later or a retry for ever.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseAgentArgs } from '../../cli/agent';
import { isHoptraceError } from '../../common/errors';

const dir = mkdtempSync(join(tmpdir(), 'ht-agent-args-'));
t.teardown(() => {
  rmSync(dir, { recursive: true, force: true });
});
const tok = join(dir, 'tok');
writeFileSync(tok, 'secret\n');
const base = ['--collector', 'ws://h:7070/v1/agents', '--token-file', tok];

/** `CODE where` of what parseAgentArgs throws for `argv`, or 'ok'. */
function outcome(argv: string[]): string {
  try {
    parseAgentArgs(argv, {});
    return 'ok';
  } catch (e) {
    return isHoptraceError(e) ? `${e.code} ${e.where ?? ''}` : `internal ${String(e)}`;
  }
}

function message(argv: string[]): string {
  try {
    parseAgentArgs(argv, {});
    return '';
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

void t.test('--collector is a whole ws:// or wss:// URL', (t) => {
  const c = (url: string): string => outcome(['--collector', url, '--token-file', tok]);
  t.equal(c('ws://127.0.0.1:99999/v1/agents'), 'CLI_USAGE --collector', 'a port past 65535');
  t.equal(c('ws://'), 'CLI_USAGE --collector');
  t.equal(c('http://h:7070/v1/agents'), 'CLI_USAGE --collector');
  t.equal(c('ws://h:7070/v1/agents'), 'ok');
  t.equal(c('wss://[fd00::1]:7070/v1/agents'), 'ok');
  t.match(message(['--collector', 'ws://h:99999/x', '--token-file', tok]), /not a URL/);
  t.end();
});

void t.test("--log-level is one of pino's", (t) => {
  t.equal(outcome([...base, '--log-level', 'chatty']), 'CLI_USAGE --log-level');
  t.match(message([...base, '--log-level', 'chatty']), /one of fatal, error, warn, info/);
  for (const l of ['trace', 'info', 'silent'])
    t.equal(outcome([...base, '--log-level', l]), 'ok', l);
  t.end();
});

void t.test('--max-captures', (t) => {
  t.equal(parseAgentArgs([...base, '--max-captures', '8'], {}).maxCaptures, 8);
  t.equal(parseAgentArgs(base, {}).maxCaptures, undefined, 'the default (4)');
  for (const v of ['0', '1.5', 'many', '1e3'])
    t.equal(outcome([...base, '--max-captures', v]), 'CLI_USAGE --max-captures', v);
  t.end();
});

void t.test('--cert and --key are loaded as a TLS pair at start (AGENT_TLS)', (t) => {
  const ssl = (...args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  };
  const self = (name: string): void => {
    ssl(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
    );
  };
  self('a');
  self('b');
  const bad = join(dir, 'bad.pem');
  writeFileSync(bad, 'garbage\n');
  const pair = (cert: string, key: string): string[] => [
    ...base,
    '--cert',
    join(dir, cert),
    '--key',
    join(dir, key),
  ];
  t.equal(outcome(pair('bad.pem', 'bad.pem')), 'AGENT_TLS --cert/--key', 'not PEM');
  t.equal(outcome(pair('a.pem', 'b.key')), 'AGENT_TLS --cert/--key', "another certificate's key");
  t.equal(outcome(pair('a.pem', 'a.key')), 'ok');
  const opts = parseAgentArgs(pair('a.pem', 'a.key'), {});
  t.same(opts.cert, readFileSync(join(dir, 'a.pem')));
  t.end();
});

void t.test('--token-file: a regular file of at most 64 KiB', (t) => {
  const big = join(dir, 'big');
  writeFileSync(big, '');
  truncateSync(big, 2 * 1024 * 1024);
  t.equal(outcome([...base.slice(0, 2), '--token-file', big]), 'AUTH_NO_TOKEN ' + big);
  t.match(message([...base.slice(0, 2), '--token-file', big]), /holds more than 64 KiB/);
  t.equal(outcome([...base.slice(0, 2), '--token-file', dir]), 'AUTH_NO_TOKEN ' + dir);
  t.match(message([...base.slice(0, 2), '--token-file', dir]), /a directory, not a regular file/);
  t.end();
});

// Not run against the old code: /dev/zero grew it to 1.5 GB, and a FIFO hung it for ever.
void t.test('--token-file: a device or a FIFO is refused at once', (t) => {
  const fifo = join(dir, 'fifo.tok');
  execFileSync('mkfifo', [fifo]);
  for (const [file, kind] of [
    ['/dev/zero', 'a device'],
    [fifo, 'a FIFO'],
  ] as const) {
    const started = Date.now();
    t.equal(outcome([...base.slice(0, 2), '--token-file', file]), `AUTH_NO_TOKEN ${file}`);
    t.match(
      message([...base.slice(0, 2), '--token-file', file]),
      new RegExp(`${kind}, not a regular file`),
    );
    t.ok(Date.now() - started < 1000, 'at once');
  }
  t.end();
});

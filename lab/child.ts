/** Helpers for long-lived processes the lab starts: wait for a ready line, stop and reap. */
import type { ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { HoptraceError } from '../common/errors';

/**
 * Resolves with the first line of `stream` matching `pattern`. Rejects with LAB_SETUP when the
 * process exits first or `timeoutMs` passes, quoting what it printed so far.
 */
export function waitForLine(
  child: ChildProcess,
  stream: Readable | null,
  pattern: RegExp,
  what: string,
  timeoutMs = 5000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    if (stream === null) {
      reject(
        new HoptraceError('LAB_SETUP', `${what}: no output stream to wait on`, { where: 'lab' }),
      );
      return;
    }
    let buf = '';
    const seen: string[] = [];
    const finish = (err: Error | null, line?: string): void => {
      clearTimeout(timer);
      stream.off('data', onData);
      child.off('exit', onExit);
      if (err !== null) reject(err);
      else resolve(line ?? '');
    };
    const onData = (chunk: Buffer | string): void => {
      buf += chunk.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        seen.push(line);
        if (pattern.test(line)) {
          finish(null, line);
          return;
        }
      }
    };
    const onExit = (code: number | null, sig: NodeJS.Signals | null): void => {
      finish(
        new HoptraceError(
          'LAB_SETUP',
          `${what} exited (${sig ?? `code ${code}`}) before it was ready: ${[...seen, buf].join(' | ').trim()}`,
          { where: 'lab' },
        ),
      );
    };
    const timer = setTimeout(() => {
      finish(
        new HoptraceError(
          'LAB_SETUP',
          `${what} not ready after ${timeoutMs} ms: ${[...seen, buf].join(' | ').trim()}`,
          { where: 'lab' },
        ),
      );
    }, timeoutMs);
    stream.on('data', onData);
    child.once('exit', onExit);
  });
}

/**
 * Collects everything `stream` prints (for logs read after the process ends), or only its last
 * `maxChars` characters (a process that logs without end, such as a collector under a fuzzer).
 */
export function collect(stream: Readable | null, maxChars = Infinity): () => string {
  let text = '';
  stream?.on('data', (c: Buffer | string) => {
    text += c.toString();
    if (text.length > maxChars * 2) text = text.slice(-maxChars);
  });
  return () => (text.length > maxChars ? text.slice(-maxChars) : text);
}

/** Sends `signal`, waits for exit, SIGKILLs after `timeoutMs`. Resolves with the exit code. */
export function stopChild(
  child: ChildProcess,
  signal: NodeJS.Signals = 'SIGTERM',
  timeoutMs = 3000,
): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    child.kill(signal);
  });
}

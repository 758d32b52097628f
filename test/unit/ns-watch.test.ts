/**
 * agent/netns/ns-watch.ts: a namespace file in a directory is checked when the directory says it
 * changed (inotify), not on a timer of its own; /proc paths and unwatchable directories are polled;
 * stopping leaves no watch and no tick behind.
 */
import { mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { tickerCounts } from '../../agent/ticker';
import {
  BACKSTOP_MS,
  PROC_POLL_MS,
  watchedDirs,
  watchNamespaceFile,
} from '../../agent/netns/ns-watch';

const HOUR = 3_600_000;

/** Resolves once `n` calls were counted, or after `ms` with what was counted. */
function counter(): {
  check: () => void;
  calls: () => number;
  until: (n: number, ms: number) => Promise<number>;
} {
  let calls = 0;
  let wake: (() => void) | undefined;
  return {
    check: () => {
      calls++;
      wake?.();
    },
    calls: () => calls,
    until: async (n, ms) => {
      const deadline = Date.now() + ms;
      while (calls < n && Date.now() < deadline)
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 10);
        });
      return calls;
    },
  };
}

void t.test(
  'an unlinked namespace file is checked at once, with no timer of its own',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'ht-nswatch-'));
    t.teardown(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const ns = join(dir, 'pod-a');
    writeFileSync(ns, '');
    writeFileSync(join(dir, 'pod-b'), '');
    const a = counter();
    // No backstop within the test: only the directory's watch can call the check.
    const stop = watchNamespaceFile(ns, a.check, { backstopMs: HOUR });
    t.same(watchedDirs(), new Map([[dir, 1]]), 'one directory watch');
    t.same(tickerCounts(), new Map([[HOUR, 1]]), 'the backstop only');
    // Another pod's file coming and going is not this check's business.
    renameSync(join(dir, 'pod-b'), join(dir, 'pod-c'));
    unlinkSync(join(dir, 'pod-c'));
    writeFileSync(join(dir, 'pod-d'), '');
    await new Promise((r) => setTimeout(r, 100));
    t.equal(a.calls(), 0, 'other files: not called');
    unlinkSync(ns);
    t.ok((await a.until(1, 5000)) >= 1, 'called once the file was unlinked');
    stop();
    stop();
    t.same(watchedDirs(), new Map(), 'stopped: no watch left');
    t.same(tickerCounts(), new Map(), 'and no tick');
  },
);

void t.test('checks of one directory share its watch; each stops on its own', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ht-nswatch-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  for (const f of ['x', 'y']) writeFileSync(join(dir, f), '');
  const x = counter();
  const y = counter();
  const stopX = watchNamespaceFile(join(dir, 'x'), x.check);
  const stopY = watchNamespaceFile(join(dir, 'y'), y.check);
  t.same(watchedDirs(), new Map([[dir, 2]]));
  t.same(tickerCounts(), new Map([[BACKSTOP_MS, 2]]), 'both in the one backstop tick');
  stopX();
  t.same(watchedDirs(), new Map([[dir, 1]]));
  unlinkSync(join(dir, 'x'));
  unlinkSync(join(dir, 'y'));
  t.ok((await y.until(1, 5000)) >= 1, 'y is called');
  t.equal(x.calls(), 0, 'x stopped: never called');
  stopY();
  t.same(watchedDirs(), new Map());
  t.same(tickerCounts(), new Map());
});

void t.test('/proc paths and unwatchable directories are polled', async (t) => {
  const p = counter();
  const stopP = watchNamespaceFile('/proc/1/ns/net', p.check);
  t.same(tickerCounts(), new Map([[PROC_POLL_MS, 1]]), '/proc: the poll');
  t.same(watchedDirs(), new Map(), 'no directory watch');
  const gone = counter();
  const stopG = watchNamespaceFile('/nonexistent-ht-dir/ns', gone.check);
  t.same(tickerCounts(), new Map([[PROC_POLL_MS, 2]]), 'no such directory: polled too');
  t.ok((await gone.until(1, 2000)) >= 1, 'and checked');
  stopP();
  stopG();
  const q = counter();
  const stopQ = watchNamespaceFile('/run/netns/x', q.check, { pollMs: 5 });
  t.same(tickerCounts(), new Map([[5, 1]]), 'pollMs: polled at that period');
  t.ok((await q.until(3, 2000)) >= 3);
  stopQ();
  t.same(tickerCounts(), new Map());
});

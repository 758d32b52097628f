/**
 * A collector over a temporary data directory with its API, for the tests of what it holds of
 * finished captures and repros (recent-finished.test, disk-retention.test); `/ui/` paths are asked
 * with a web login's cookie.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApi } from '../../collector/http';
import { silentLogger, type CollectorLogger } from '../../collector/logger';
import type { RetentionPolicy } from '../../collector/disk-retention';
import { SessionManager, type Clock } from '../../collector/sessions';
import { CaptureStore } from '../../collector/store';
import { sessionsUiSource } from '../../collector/ui/ui-source';
import { UiSessions } from '../../collector/ui/ui-sessions';
import { twoNodeHub } from './collector-fixtures';
import { bodyText } from './api-body';
import { isStreamBody } from '../../collector/api-message';

export const TOKEN = 'sekrit-token-0123';
export const SPEC = {
  points: [
    { name: 'decap', target: '10.244.1.10', iface: 'tun0' },
    { name: 'backend', target: '10.244.2.5', iface: 'eth0' },
  ],
  timeoutMs: 3_600_000,
};

export function tempDir(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-recent-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

export function collector(
  t: { teardown(fn: () => Promise<void> | void): void },
  dir: string,
  keep: {
    captures: number;
    repros: number;
    clock?: Clock;
    retain?: RetentionPolicy;
    retainRepros?: RetentionPolicy;
    logger?: CollectorLogger;
  },
  hub = twoNodeHub(),
  store = new CaptureStore({ dir, fsync: false }),
) {
  const sessions = new SessionManager({
    hub,
    store,
    logger: keep.logger ?? silentLogger(),
    maxFinishedHeld: keep.captures,
    maxFinishedRepros: keep.repros,
    frames: false,
    ...(keep.clock === undefined ? {} : { clock: keep.clock }),
    ...(keep.retain === undefined ? {} : { retainFinished: keep.retain }),
    ...(keep.retainRepros === undefined ? {} : { retainFinishedRepros: keep.retainRepros }),
  });
  sessions.start();
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await sessions.close();
  };
  t.teardown(close);
  const api = createApi({
    sessions,
    tokens: [TOKEN],
    collectorId: 'c',
    logger: silentLogger(),
    ui: {
      source: sessionsUiSource(sessions),
      logins: new UiSessions([TOKEN], Date.now),
      nowMs: Date.now,
    },
  });
  let cookie: string | undefined;
  const req = async (method: string, url: string, body?: unknown) => {
    const ui = url.startsWith('/ui/');
    if (ui && cookie === undefined) {
      const r = await api.handle({
        method: 'POST',
        url: '/ui/login',
        headers: {},
        body: new URLSearchParams({ token: TOKEN, next: '/ui/' }).toString(),
      });
      cookie = (r.headers['set-cookie'] ?? '').split(';')[0] ?? '';
    }
    const r = await api.handle({
      method,
      url,
      headers: ui ? { cookie: cookie ?? '' } : { authorization: `Bearer ${TOKEN}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = isStreamBody(r.body) ? '' : bodyText(r.body);
    return {
      status: r.status,
      text,
      json: text.startsWith('{') ? (JSON.parse(text) as unknown) : null,
    };
  };
  return { sessions, store, req, close };
}

/**
 * The web view's routes under `/ui/`, on the API's port with the API's tokens:
 *
 *   GET  /ui/login, POST /ui/login (form: token, next)   a session cookie (ui-sessions.ts)
 *   POST /ui/logout
 *   GET  /ui/                                          captures and repros
 *   GET  /ui/captures/:id                              progress, then verdict, picture, files
 *   GET  /ui/captures/:id/files/:name                  one form of the bundle (download)
 *   GET  /ui/captures/:id/files/hoptrace-:id.tar       the whole bundle as one archive (download)
 *   GET  /ui/repros/:id                                the timeline
 *   GET  /ui/repros/:id/files/:name, …/hoptrace-:id.tar  a repro's bundle, the same way
 *
 * Without a session a GET is sent to the login form (303) and anything else gets 401. Every page
 * is sent with a Content-Security-Policy that allows no script and nothing from elsewhere.
 */
import { requestUrl } from '../request-url';
import { HoptraceError } from '../../common/errors';
import type { AnalysisResult } from '../../core/report/analysis-result';
import { decodeSegment } from '../api-errors';
import type { CaptureView } from '../capture-views';
import type { ApiRequest, ApiResponse } from '../api-message';
import { archiveName, type ArchiveRefusal, type BundleArchive } from '../bundle-archive';
import type { ReproView } from '../repro-state';
import { isReproFile, type ReproFileName } from '../repro-bundle';
import { CAPTURE_ID_RE } from '../store';
import {
  capturePage,
  errorPage,
  listPage,
  loginPage,
  reproPage,
  type BundleFile,
  type ListCounts,
} from './ui-pages';
import type { UiSessions } from './ui-sessions';

/** One file of a capture's bundle as the UI serves it. */
export interface BundleBody {
  contentType: string;
  body: string | Buffer;
}

/** What the web view reads; the collector's SessionManager and bundle provide it. */
export interface UiSource {
  captures(): CaptureView[];
  capture(id: string): CaptureView | undefined;
  /** The analysis of a capture with a verdict, else null. */
  result(id: string): AnalysisResult | null;
  repros(): ReproView[];
  repro(id: string): ReproView | undefined;
  /** What the two lists leave out (older finished ones) and the repros held in memory only. */
  listCounts(): ListCounts;
  /** The bundle's files that exist for a capture. */
  files(id: string): BundleFile[];
  file(id: string, name: string): BundleBody | null;
  /** The sequence picture of a capture with a verdict (inline SVG), else null. */
  captureSvg(id: string): string | null;
  reproSvg(id: string): string | null;
  /** The bundle's files that exist for a repro now, and one of them. */
  reproFiles(id: string): BundleFile[];
  reproFile(id: string, name: ReproFileName): BundleBody | null;
  /**
   * The whole bundle of a capture or a repro as one archive (collector/bundle-archive.ts), or why
   * it is not offered; null when there is no such capture with a verdict, or no such repro.
   */
  archive(id: string): BundleArchive | ArchiveRefusal | null;
  reproArchive(id: string): BundleArchive | ArchiveRefusal | null;
}

export interface UiDeps {
  source: UiSource;
  logins: UiSessions;
  nowMs: () => number;
}

export const UI_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/** The longest login form body read (a token and a path). */
export const MAX_LOGIN_BODY = 4096;

const html = (status: number, body: string, extra: Record<string, string> = {}): ApiResponse => ({
  status,
  headers: { 'content-type': 'text/html; charset=utf-8', ...UI_HEADERS, ...extra },
  body,
});

const redirect = (location: string, extra: Record<string, string> = {}): ApiResponse => ({
  status: 303,
  headers: { location, ...UI_HEADERS, ...extra },
  body: '',
});

/** A `next` after login: a path of the web view, nothing else (no open redirect). */
export function safeNext(next: string | null | undefined): string {
  if (next === null || next === undefined) return '/ui/';
  return /^\/ui\/[A-Za-z0-9._~%/-]*$/.test(next) && !next.includes('//') ? next : '/ui/';
}

const allowed = (method: string, allow: string): ApiResponse => ({
  ...html(405, errorPage(405, `method ${method} is not allowed here`)),
  headers: { 'content-type': 'text/html; charset=utf-8', ...UI_HEADERS, allow },
});

/** A bundle file as a download named `hoptrace-<id>-<name>`. */
const download = (id: string, name: string, f: BundleBody): ApiResponse => ({
  status: 200,
  headers: {
    'content-type': f.contentType,
    'content-disposition': `attachment; filename="hoptrace-${id}-${name}"`,
    ...UI_HEADERS,
  },
  body: f.body,
});

/**
 * The whole bundle as `hoptrace-<id>.tar` (no other name: it unpacks to `hoptrace-<id>/`), or the
 * page saying why there is none.
 */
function archiveDownload(id: string, got: BundleArchive | ArchiveRefusal | null): ApiResponse {
  if (got === null) return html(404, errorPage(404, `${archiveName(id)} not found`));
  if ('status' in got) return html(got.status, errorPage(got.status, got.detail));
  return {
    status: 200,
    headers: {
      'content-type': 'application/x-tar',
      'content-disposition': `attachment; filename="${got.fileName}"`,
      ...UI_HEADERS,
    },
    body: got,
  };
}

/** Answers a `/ui` request, or null when the path is not the web view's. */
export function routeUi(req: ApiRequest, deps: UiDeps): ApiResponse | null {
  const url = requestUrl(req.url);
  const path = url.pathname;
  if (path !== '/ui' && !path.startsWith('/ui/')) return null;
  const method = req.method.toUpperCase() === 'HEAD' ? 'GET' : req.method.toUpperCase();
  if (path === '/ui') return redirect('/ui/');
  const { logins, source } = deps;
  if (path === '/ui/login') {
    if (method === 'GET') return html(200, loginPage(null, safeNext(url.searchParams.get('next'))));
    if (method !== 'POST') return allowed(method, 'GET, POST');
    const form = new URLSearchParams(req.body ?? '');
    const next = safeNext(form.get('next'));
    const id = logins.login(form.get('token') ?? '');
    if (id === null)
      return html(401, loginPage('That token is not accepted by this collector.', next));
    return redirect(next, { 'set-cookie': logins.cookie(id) });
  }
  const session = logins.check(req.headers['cookie']);
  if (path === '/ui/logout') {
    if (method !== 'POST') return allowed(method, 'POST');
    if (session !== null) logins.logout(session);
    return redirect('/ui/login', { 'set-cookie': logins.cookie(null) });
  }
  if (session === null) {
    if (method === 'GET') return redirect(`/ui/login?next=${encodeURIComponent(path)}`);
    return html(401, loginPage('Log in first.', '/ui/'));
  }
  if (method !== 'GET') return allowed(method, 'GET');
  if (path === '/ui/')
    return html(
      200,
      listPage(source.captures(), source.repros(), deps.nowMs(), source.listCounts()),
    );
  const cap = /^\/ui\/captures\/([^/]+)(?:\/(files\/[^/]+|sequence\.svg))?$/.exec(path);
  if (cap !== null) {
    const id = decodeSegment(cap[1] ?? '', path);
    const v = CAPTURE_ID_RE.test(id) ? source.capture(id) : undefined;
    if (v === undefined) return html(404, errorPage(404, `capture ${id} not found`));
    const sub = cap[2];
    if (sub === undefined)
      return html(200, capturePage(v, source.result(id), source.captureSvg(id), source.files(id)));
    if (sub === 'sequence.svg') {
      const svg = source.captureSvg(id);
      return svg === null
        ? html(404, errorPage(404, 'the picture exists once the capture has a verdict'))
        : {
            status: 200,
            headers: { 'content-type': 'image/svg+xml; charset=utf-8', ...UI_HEADERS },
            body: svg,
          };
    }
    const name = decodeSegment(sub.slice('files/'.length), path);
    if (name === archiveName(id)) return archiveDownload(id, source.archive(id));
    const f = /^[A-Za-z0-9._-]{1,64}$/.test(name) ? source.file(id, name) : null;
    if (f === null) return html(404, errorPage(404, `${name} of ${id} not found`));
    return download(id, name, f);
  }
  const rep = /^\/ui\/repros\/([^/]+)(?:\/files\/([^/]+))?$/.exec(path);
  if (rep !== null) {
    const id = decodeSegment(rep[1] ?? '', path);
    const r = source.repro(id);
    if (r === undefined) return html(404, errorPage(404, `repro ${id} not found`));
    const name = rep[2] === undefined ? undefined : decodeSegment(rep[2], path);
    if (name === undefined)
      return html(200, reproPage(r, source.reproSvg(id), source.reproFiles(id)));
    if (name === archiveName(id)) return archiveDownload(id, source.reproArchive(id));
    const f = isReproFile(name) ? source.reproFile(id, name) : null;
    if (f === null) return html(404, errorPage(404, `${name} of ${id} not found`));
    return download(id, name, f);
  }
  return html(404, errorPage(404, `${path} is not a page of the web view`));
}

/** A UI request's error (a broken percent-encoding) as a page, not JSON. */
export function uiErrorResponse(e: HoptraceError): ApiResponse {
  const status = e.code === 'API_BAD_REQUEST' ? 400 : 500;
  return html(status, errorPage(status, e.message));
}

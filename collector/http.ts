/**
 * The collector's HTTP JSON API on node:http. `handle()` is socket-free (a plain request object in,
 * a response object out), so most tests need no network; `listener()` adapts it to a server.
 *
 *   GET    /healthz                          {ok, collectorId, agentsConnected, reprosPinned}; no token needed
 *   GET    /v1/agents
 *   POST   /v1/captures                      201 CaptureView | 400 | 409 API_NO_AGENT | 429 API_TOO_MANY_CAPTURES, API_AGENT_BUSY
 *   GET    /v1/captures                      {captures: CaptureView[], olderFinished}
 *   GET    /v1/captures/:id                  CaptureView | 404
 *   GET    /v1/captures/:id/<bundle file>    report.md, .json, .html, sequence.svg, evidence.pcapng, inventory.json, SHA256SUMS; 404 until the verdict
 *   GET    /v1/captures/:id/bundle.tar       the whole bundle as hoptrace-<id>.tar (collector/bundle-archive.ts); 404 until SHA256SUMS
 *   DELETE /v1/captures/:id                  cancels (stop to the agents)
 *   /v1/repros…                              collector/repro-http.ts (and …/:id/<file>, …/:id/bundle.tar here)
 *   POST   /v1/doctor                        DoctorResult (collector/doctor-remote.ts) | 400 (DOCTOR_BAD_REQUEST: an agent refused it) | 409
 *
 * Authentication: `Authorization: Bearer <token>` with an agent token or an API token. Errors are
 * `{"error": {"code", "message", "where", "hint"}}`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { bearerToken, tokenMatches } from '../common/auth';
import { HoptraceError, isHoptraceError, type ErrorCode } from '../common/errors';
import {
  decodeSegment,
  MethodNotAllowed,
  noSuchCapture,
  noSuchRepro,
  notFound,
} from './api-errors';
import { requestUrl } from './request-url';
import { parseCaptureRequest } from './capture-request';
import { doctorViaAgents, parseDoctorSpec } from './doctor-remote';
import type { CollectorLogger } from './logger';
import { isStreamBody, type ApiRequest, type ApiResponse } from './api-message';
import type { ArchiveRefusal, BundleArchive } from './bundle-archive';
import { isReproFile } from './repro-bundle';
import { routeRepro } from './repro-http';
import { MAX_LOGIN_BODY, routeUi, uiErrorResponse, type UiDeps } from './ui/ui-routes';
import { FINAL_STATES } from './session';
import type { SessionManager } from './sessions';
import { BUNDLE_FILES, BUNDLE_TYPES, CAPTURE_ID_RE, type BundleFileName } from './store';

export type { ApiRequest, ApiResponse };

export interface ApiOptions {
  sessions: SessionManager;
  /** Accepted bearer tokens (the agents' and any API-only ones). */
  tokens: readonly string[];
  collectorId: string;
  logger: CollectorLogger;
  /** The web view under /ui/ (collector/ui/); absent: /ui/ is not served. */
  ui?: UiDeps;
}

export const MAX_BODY_BYTES = 1 << 20;

const STATUS: Partial<Record<ErrorCode, number>> = {
  API_BAD_REQUEST: 400,
  CLI_BAD_INVENTORY: 400,
  API_UNAUTHORIZED: 401,
  API_NOT_FOUND: 404,
  API_METHOD_NOT_ALLOWED: 405,
  API_NO_AGENT: 409,
  API_TOO_MANY_CAPTURES: 429,
  API_AGENT_BUSY: 429,
  DOCTOR_NO_AGENT: 409,
  DOCTOR_BAD_REQUEST: 400,
  REPRO_NO_WORKLOAD: 409,
  REPRO_FULL: 429,
  REPRO_NOT_SUPPORTED: 501,
  STORE_IO: 503,
  BUNDLE_ARCHIVE: 503,
};

/** The name of the whole-bundle archive under a capture's or a repro's path. */
const ARCHIVE_FILE = 'bundle.tar';

/**
 * A bundle's archive as the download (its name hoptrace-<id>.tar, which unpacks to hoptrace-<id>/),
 * or the error saying why there is none: 404 while there is no SHA256SUMS to check it with, 503
 * when the data directory's bundle cannot be archived.
 */
function archiveResponse(
  path: string,
  got: BundleArchive | ArchiveRefusal | null,
  finishedWithout = false,
): ApiResponse {
  if (got === null && finishedWithout)
    throw notFound(
      path,
      'the capture finished without a verdict: it has no report to archive',
      'GET /v1/captures/:id says why it ended',
    );
  if (got === null)
    throw notFound(path, 'not there yet', 'the archive exists once there is a verdict');
  if ('status' in got) {
    if (got.status === 404)
      throw notFound(
        path,
        got.detail,
        'the archive exists once the bundle has its SHA256SUMS (a finished capture or repro); its files can be fetched one by one',
      );
    throw new HoptraceError(got.code ?? 'BUNDLE_ARCHIVE', got.detail, {
      where: path,
      hint: "the collector's log and data directory say more; the bundle's files can be fetched one by one",
    });
  }
  return {
    status: 200,
    headers: {
      'content-type': 'application/x-tar',
      'content-disposition': `attachment; filename="${got.fileName}"`,
      'x-content-type-options': 'nosniff',
    },
    body: got,
  };
}

function json(status: number, value: unknown, extra: Record<string, string> = {}): ApiResponse {
  return {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...extra },
    body: JSON.stringify(value) + '\n',
  };
}

/** The JSON error body for a HoptraceError. */
export function errorResponse(e: HoptraceError, extra: Record<string, string> = {}): ApiResponse {
  return json(
    STATUS[e.code] ?? 500,
    { error: { code: e.code, message: e.message, where: e.where ?? null, hint: e.hint ?? null } },
    extra,
  );
}

function unauthorized(path: string): HoptraceError {
  return new HoptraceError('API_UNAUTHORIZED', 'missing or wrong bearer token', {
    where: path,
    hint: 'send Authorization: Bearer <token> (the collector token file or HOPTRACE_TOKEN)',
  });
}

/** A bundle file; report.html and the pictures opened from here: no script, nothing fetched. */
function bundleResponse(contentType: string, body: string | Buffer): ApiResponse {
  return {
    status: 200,
    headers: {
      'content-type': contentType,
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
      'x-content-type-options': 'nosniff',
    },
    body,
  };
}

const WWW_AUTHENTICATE = { 'www-authenticate': 'Bearer realm="hoptrace"' };

const headAsGet = (method: string): string => {
  const m = method.toUpperCase();
  return m === 'HEAD' ? 'GET' : m;
};

export interface Api {
  handle(req: ApiRequest): Promise<ApiResponse>;
  listener(): (req: IncomingMessage, res: ServerResponse) => void;
}

/** `/ui` and everything under `/ui/` (not `/uix`). */
function isUiPath(url: string): boolean {
  let path: string;
  try {
    path = requestUrl(url).pathname;
  } catch {
    return false;
  }
  return path === '/ui' || path.startsWith('/ui/');
}

export function createApi(opts: ApiOptions): Api {
  const { sessions, tokens, collectorId, logger } = opts;

  function authorize(req: ApiRequest, path: string): void {
    if (!tokenMatches(bearerToken(req.headers['authorization']), tokens)) throw unauthorized(path);
  }

  async function route(req: ApiRequest): Promise<ApiResponse> {
    const path = requestUrl(req.url).pathname;
    // HEAD is GET without the body (the listener leaves it out).
    const method = headAsGet(req.method);
    if (path === '/healthz') {
      return json(200, {
        ok: true,
        collectorId,
        agentsConnected: sessions.agents().filter((a) => a.connected).length,
        // Finished repros that could not be saved and live in memory only (a disk problem).
        reprosPinned: sessions.repros.pinned(),
      });
    }
    authorize(req, path);
    if (path === '/v1/agents') {
      if (method !== 'GET') throw new MethodNotAllowed(method, path, ['GET']);
      return json(200, { agents: sessions.agents() });
    }
    if (path === '/v1/captures') {
      if (method === 'GET')
        return json(200, { captures: sessions.list(), olderFinished: sessions.olderFinished() });
      if (method !== 'POST') throw new MethodNotAllowed(method, path, ['GET', 'POST']);
      let body: unknown;
      try {
        body = JSON.parse(req.body ?? '');
      } catch (e) {
        throw new HoptraceError(
          'API_BAD_REQUEST',
          `the body is not JSON (${e instanceof Error ? e.message : String(e)})`,
          { where: 'body', hint: 'send Content-Type: application/json' },
        );
      }
      const view = await sessions.create(parseCaptureRequest(body));
      return json(201, view, { location: `/v1/captures/${view.id}` });
    }
    const m = /^\/v1\/captures\/([^/]+)(?:\/([A-Za-z0-9.]+))?$/.exec(path);
    if (m !== null) {
      const id = decodeSegment(m[1] ?? '', path);
      if (!CAPTURE_ID_RE.test(id)) throw noSuchCapture(path);
      const file = m[2];
      if (file === ARCHIVE_FILE) {
        if (method !== 'GET') throw new MethodNotAllowed(method, path, ['GET']);
        const v = sessions.get(id);
        if (v === undefined) throw noSuchCapture(path);
        const finished = FINAL_STATES.includes(v.state);
        return archiveResponse(path, sessions.bundleArchive(id), finished && v.verdict === null);
      }
      if (file !== undefined) {
        if (!(BUNDLE_FILES as readonly string[]).includes(file))
          throw notFound(path, "not a file of a capture's bundle", 'see the API in README.md');
        if (method !== 'GET') throw new MethodNotAllowed(method, path, ['GET']);
        if (sessions.get(id) === undefined) throw noSuchCapture(path);
        const name = file as BundleFileName;
        const body = sessions.bundleFile(id, name);
        if (body === null)
          throw notFound(
            path,
            'not there yet',
            name === 'evidence.pcapng'
              ? 'evidence.pcapng exists once the verdict is known and the agents answered for their frames'
              : name === 'SHA256SUMS'
                ? 'SHA256SUMS is written with the report once the capture has a verdict (a capture a collector older than this one finished has none)'
                : 'the report exists once the capture has a verdict',
          );
        return bundleResponse(BUNDLE_TYPES[name], body);
      }
      if (method === 'GET') {
        const v = sessions.get(id);
        if (v === undefined) throw noSuchCapture(path);
        return json(200, v);
      }
      if (method === 'DELETE') {
        const v = sessions.cancel(id);
        if (v === undefined) throw noSuchCapture(path);
        return json(200, v);
      }
      throw new MethodNotAllowed(method, path, ['GET', 'DELETE']);
    }
    throw notFound(path, 'no such endpoint', 'see the API in README.md');
  }

  /** A bug: logged, answered as 500 INTERNAL without its details. */
  function internal(e: unknown, url: string, what: string): ApiResponse {
    logger.error({ err: e instanceof Error ? e.message : String(e) }, what);
    return json(500, {
      error: {
        code: 'INTERNAL',
        message: 'internal error (please report)',
        where: url,
        hint: null,
      },
    });
  }

  async function handle(req: ApiRequest): Promise<ApiResponse> {
    await Promise.resolve();
    if (opts.ui !== undefined && isUiPath(req.url)) {
      try {
        const r = routeUi(req, opts.ui);
        if (r !== null) return r;
      } catch (e) {
        if (isHoptraceError(e)) return uiErrorResponse(e);
        return internal(e, req.url, 'UI internal error');
      }
    }
    try {
      // `/v1/repros…` (collector/repro-http.ts) behind the same token check.
      const path = requestUrl(req.url).pathname;
      if (path === '/v1/doctor') {
        authorize(req, path);
        if (req.method.toUpperCase() !== 'POST')
          throw new MethodNotAllowed(req.method.toUpperCase(), path, ['POST']);
        const spec = parseDoctorSpec(req.body ?? '');
        return json(200, await doctorViaAgents(sessions.agentInfos(), sessions.requests, spec));
      }
      if (path.startsWith('/v1/repros')) {
        authorize(req, path);
        const file = /^\/v1\/repros\/([^/]+)\/([A-Za-z0-9.]+)$/.exec(path);
        const name = file?.[2] ?? '';
        if (file !== null && (name === ARCHIVE_FILE || isReproFile(name))) {
          if (headAsGet(req.method) !== 'GET')
            throw new MethodNotAllowed(req.method.toUpperCase(), path, ['GET']);
          const id = decodeSegment(file[1] ?? '', path);
          if (sessions.repros.get(id) === undefined) throw noSuchRepro(path);
          if (name === ARCHIVE_FILE)
            return archiveResponse(path, sessions.repros.bundleArchive(id));
          const f = sessions.repros.bundleFile(id, name);
          if (f === null)
            throw notFound(
              path,
              'not there yet',
              'evidence.pcapng is written when the repro finishes (GET /v1/repros/:id: bundle.state)',
            );
          return bundleResponse(f.contentType, f.body);
        }
        const r = await routeRepro(sessions.repros, headAsGet(req.method), path, req.body);
        if (r !== null) return json(r.status, r.value);
      }
      return await route(req);
    } catch (e) {
      if (e instanceof MethodNotAllowed) return errorResponse(e, { allow: e.allow.join(', ') });
      if (isHoptraceError(e)) {
        if (e.code === 'API_UNAUTHORIZED') return errorResponse(e, WWW_AUTHENTICATE);
        return errorResponse(e);
      }
      return internal(e, req.url, 'API internal error');
    }
  }

  function listener(): (req: IncomingMessage, res: ServerResponse) => void {
    return (req, res) => {
      const send = (r: ApiResponse): void => {
        const body = r.body;
        if (!isStreamBody(body)) {
          res.writeHead(r.status, r.headers);
          // HEAD: the headers GET would send, no body.
          res.end(req.method === 'HEAD' ? undefined : body);
          return;
        }
        res.writeHead(r.status, { ...r.headers, 'content-length': String(body.length) });
        if (req.method === 'HEAD') {
          body.release();
          res.end();
          return;
        }
        // Written as the client reads it. A body that fails part-way destroys the response: the
        // client sees it cut short against its Content-Length, never a whole-looking download.
        void pipeline(Readable.from(body.chunks(), { objectMode: false }), res)
          .catch((e: unknown) => {
            // A client that went away is its own business; a body that failed is the collector's.
            const gone = (e as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE';
            const err = e instanceof Error ? e.message : String(e);
            const fields = { err, ...(isHoptraceError(e) ? { code: e.code } : {}) };
            const what = `${path}: the download was cut short`;
            if (gone) logger.debug(fields, `${what} (the client went away)`);
            else logger.warn(fields, what);
          })
          .finally(() => {
            body.release();
          });
      };
      // The token is checked before any body is read: a peer without one never makes the
      // collector hold a byte of what it sends.
      let path = '/';
      try {
        path = requestUrl(req.url ?? '/').pathname;
      } catch {
        // handle() answers a URL it cannot parse.
      }
      const auth = req.headers['authorization'];
      // The web view checks its own session cookie; its only body is the small login form.
      const ui = opts.ui !== undefined && isUiPath(path);
      const maxBody = ui ? MAX_LOGIN_BODY : MAX_BODY_BYTES;
      if (!ui && path !== '/healthz' && !tokenMatches(bearerToken(auth), tokens)) {
        req.resume();
        send(errorResponse(unauthorized(path), WWW_AUTHENTICATE));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let tooLarge = false;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > maxBody) tooLarge = true;
        else chunks.push(c);
      });
      req.on('end', () => {
        if (tooLarge) {
          const e = new HoptraceError('API_BAD_REQUEST', `the body exceeds ${maxBody} bytes`, {
            where: 'body',
          });
          send({ ...errorResponse(e), status: 413 });
          return;
        }
        const headers: Record<string, string | undefined> = {};
        for (const [k, v] of Object.entries(req.headers))
          headers[k] = Array.isArray(v) ? v.join(', ') : v;
        void handle({
          method: req.method ?? 'GET',
          url: req.url ?? '/',
          headers,
          body: Buffer.concat(chunks).toString('utf8'),
        }).then(send);
      });
    };
  }

  return { handle, listener };
}

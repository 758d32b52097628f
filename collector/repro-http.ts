/**
 * `/v1/repros` of the collector API (mounted by collector/http.ts, same token and error shape):
 *
 *   POST   /v1/repros                 201 ReproView | 400 | 409 REPRO_NO_WORKLOAD | 429 API_AGENT_BUSY, API_TOO_MANY_CAPTURES | 501 REPRO_NOT_SUPPORTED (kubernetes without the API)
 *   GET    /v1/repros                 {repros: ReproView[], olderFinished, pinned}
 *   GET    /v1/repros/:id             ReproView (timeline computed from the events so far)
 *   POST   /v1/repros/:id/probes      one probe the prober sent {probeId, sport, startedAtMs, endedAtMs, ok, httpCode?, error?}
 *   POST   /v1/repros/:id/marks       {kind: deleted|replacement-ready|note, atMs, detail?}
 *   POST   /v1/repros/:id/delete      deletes the attached pod through the Kubernetes API (501 without --kubernetes/--kubeconfig)
 *   POST   /v1/repros/:id/finish      {returnRoutes?: [{node, dst, via?, dev?}]} → stops, summary
 */
import { HoptraceError } from '../common/errors';
import { decodeSegment, MethodNotAllowed, noSuchRepro } from './api-errors';
import type { ReproManager, ReproView } from './repro';
import { parseFinish, parseMark, parseProbeReport, parseReproRequest } from './repro-requests';
import { REPRO_ID_RE } from './store';

/** A JSON answer (status, body) before http.ts adds the headers. */
export interface ReproAnswer {
  status: number;
  value: unknown;
}

function parseBody(text: string | undefined): unknown {
  if (text === undefined || text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new HoptraceError(
      'API_BAD_REQUEST',
      `the body is not JSON (${e instanceof Error ? e.message : String(e)})`,
      {
        where: 'body',
        hint: 'send Content-Type: application/json',
      },
    );
  }
}

function found(path: string, v: ReproView | undefined): ReproAnswer {
  if (v === undefined) throw noSuchRepro(path);
  return { status: 200, value: v };
}

/** Answers a `/v1/repros…` call, or null when `path` is not one. */
export async function routeRepro(
  repros: ReproManager,
  method: string,
  path: string,
  body: string | undefined,
): Promise<ReproAnswer | null> {
  if (path === '/v1/repros') {
    if (method === 'GET')
      return {
        status: 200,
        value: {
          repros: repros.list(),
          olderFinished: repros.olderFinished(),
          pinned: repros.pinned(),
        },
      };
    if (method !== 'POST') throw new MethodNotAllowed(method, path, ['GET', 'POST']);
    return { status: 201, value: await repros.create(parseReproRequest(parseBody(body))) };
  }
  const m = /^\/v1\/repros\/([^/]+)(?:\/(probes|marks|delete|finish))?$/.exec(path);
  if (m === null) return null;
  const id = decodeSegment(m[1] ?? '', path);
  if (!REPRO_ID_RE.test(id)) throw noSuchRepro(path);
  const action = m[2];
  if (action === undefined) {
    if (method !== 'GET') throw new MethodNotAllowed(method, path, ['GET']);
    return found(path, repros.get(id));
  }
  if (method !== 'POST') throw new MethodNotAllowed(method, path, ['POST']);
  switch (action) {
    case 'probes':
      return found(path, repros.addProbe(id, parseProbeReport(parseBody(body))));
    case 'marks':
      return found(path, repros.addMark(id, parseMark(parseBody(body))));
    case 'delete':
      return found(path, await repros.deletePod(id));
    default:
      return found(path, await repros.finishReadingRoutes(id, parseFinish(parseBody(body))));
  }
}

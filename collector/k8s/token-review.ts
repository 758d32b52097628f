/**
 * Agents identified by their projected ServiceAccount token (`--token-review`). The agent's pod
 * mounts a token with audience `hoptrace` (a projected volume, short-lived, rotated by the kubelet);
 * the agent sends it as its bearer token, re-read on every connection. The collector asks the API
 * server (TokenReview) and accepts only:
 *
 *   - an authenticated token whose audiences include ours,
 *   - of the agents' ServiceAccount (`system:serviceaccount:hoptrace:hoptrace-agent` by default),
 *   - bound to a pod (the `authentication.kubernetes.io/pod-name`/`pod-uid` extras: a projected
 *     token, not a long-lived Secret token),
 *   - whose pod exists now with that uid; the identity's node is that pod's `spec.nodeName` as the
 *     API says, never what the agent's hello claims.
 *
 * Answers are cached for a minute (by the token's SHA-256; never longer than the token lives), and
 * at most `maxInFlight` reviews run at once: a flood of upgrades with made-up tokens costs the API
 * server a bounded number of requests, the rest are answered 503 and retried by real agents.
 */
import { createHash } from 'node:crypto';
import { bearerToken } from '../../common/auth';
import { isHoptraceError } from '../../common/errors';
import type { AgentAuthenticator, AgentIdentity, AuthRequest, AuthResult } from '../agent-auth';
import type { KubeApi } from './client';

export const POD_NAME_EXTRA = 'authentication.kubernetes.io/pod-name';
export const POD_UID_EXTRA = 'authentication.kubernetes.io/pod-uid';
export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';

export interface TokenReviewOptions {
  api: Pick<KubeApi, 'reviewToken' | 'readPod'>;
  /** The audience the agents' tokens are issued for (default 'hoptrace'). */
  audience?: string;
  /** The agents' ServiceAccount as `namespace:name` (default 'hoptrace:hoptrace-agent'). */
  serviceAccount?: string;
  nowMs?: () => number;
  /** How long an accepted token is remembered (default 60 s). */
  cacheMs?: number;
  /** Reviews in flight at once (default 16). */
  maxInFlight?: number;
  /** Remembered tokens at most (default 4096; the oldest go first). */
  maxCache?: number;
}

/** A JWT's three base64url parts; anything else is not a ServiceAccount token. */
const JWT_RE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** The `exp` claim (seconds), read only to bound the cache; the API server did the verifying. */
function expiryMs(token: string): number | null {
  try {
    const payload = JSON.parse(
      Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8'),
    ) as { exp?: unknown };
    return typeof payload.exp === 'number' ? payload.exp * 1000 : null;
  } catch {
    return null;
  }
}

const no = (reason: string): AuthResult => ({ ok: false, status: 401, reason });

export function tokenReviewAuth(opts: TokenReviewOptions): AgentAuthenticator {
  const audience = opts.audience ?? 'hoptrace';
  const sa = opts.serviceAccount ?? 'hoptrace:hoptrace-agent';
  const username = `system:serviceaccount:${sa}`;
  const saNamespace = sa.split(':')[0] ?? '';
  const now = opts.nowMs ?? Date.now;
  const cacheMs = opts.cacheMs ?? 60_000;
  const maxInFlight = opts.maxInFlight ?? 16;
  const maxCache = opts.maxCache ?? 4096;
  const cache = new Map<string, { identity: AgentIdentity; untilMs: number }>();
  let inFlight = 0;

  const review = async (token: string): Promise<AuthResult> => {
    const status = await opts.api.reviewToken(token, [audience]);
    if (status.authenticated !== true)
      return no(
        `the API server did not authenticate the token${status.error ? ` (${status.error})` : ''}`,
      );
    if (!(status.audiences ?? []).includes(audience))
      return no(`the token is not for audience ${audience}`);
    const user = status.user ?? {};
    if (user.username !== username)
      return no(`the token is ${String(user.username)}'s, not ${username}'s`);
    const podName = user.extra?.[POD_NAME_EXTRA]?.[0];
    const podUid = user.extra?.[POD_UID_EXTRA]?.[0];
    if (podName === undefined || podUid === undefined)
      return no('the token is not bound to a pod (a Secret-based token?): mount a projected token');
    const pod = await opts.api.readPod(saNamespace, podName);
    if (pod.metadata?.uid !== podUid)
      return no(`pod ${saNamespace}/${podName} of the token is gone (another uid now)`);
    const node = pod.spec?.nodeName;
    if (node === undefined || node === '')
      return no(`pod ${saNamespace}/${podName} of the token is not scheduled on a node`);
    const claimed = user.extra?.[NODE_NAME_EXTRA]?.[0];
    if (claimed !== undefined && claimed !== node)
      return no(`the token names node ${claimed}, its pod runs on ${node}`);
    return {
      ok: true,
      identity: {
        method: 'service-account',
        node,
        subject: `pod ${saNamespace}/${podName} (${username})`,
      },
    };
  };

  return {
    description: `Kubernetes ServiceAccount tokens of ${username} (TokenReview, audience ${audience})`,
    async authenticate(req: AuthRequest) {
      const token = bearerToken(req.headers.authorization);
      if (token === undefined || !JWT_RE.test(token) || token.length > 16_384)
        return no('not a ServiceAccount token');
      const key = createHash('sha256').update(token).digest('hex');
      const t = now();
      const hit = cache.get(key);
      if (hit !== undefined && hit.untilMs > t) return { ok: true, identity: hit.identity };
      cache.delete(key);
      if (inFlight >= maxInFlight)
        return { ok: false, status: 503, reason: `${inFlight} token reviews already in flight` };
      inFlight++;
      try {
        const r = await review(token);
        if (r.ok) {
          const exp = expiryMs(token);
          cache.set(key, {
            identity: r.identity,
            untilMs: Math.min(t + cacheMs, exp ?? Number.POSITIVE_INFINITY),
          });
          while (cache.size > maxCache) {
            const oldest = cache.keys().next().value;
            if (oldest === undefined) break;
            cache.delete(oldest);
          }
        }
        return r;
      } catch (e) {
        // The API server could not answer (or refused us): the agent retries; say why in the log.
        const why = isHoptraceError(e) ? `${e.code}: ${e.detail}` : String(e);
        if (isHoptraceError(e) && e.code === 'K8S_POD_NOT_FOUND')
          return no('the pod the token is bound to does not exist');
        return { ok: false, status: 503, reason: `TokenReview failed (${why})` };
      } finally {
        inFlight--;
      }
    },
  };
}

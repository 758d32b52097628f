/**
 * Who an agent is. The hub asks an AgentAuthenticator on every WebSocket upgrade, before a
 * WebSocket exists; the answer binds the connection to the node it may speak for.
 *
 *   shared-token     one bearer token for every agent (the old way; `--token-file`): any holder
 *                    may speak for any node. Only accepted from agents when nothing better is
 *                    configured, or with --allow-shared-agent-token.
 *   node-token       `--agent-tokens FILE`: one token per node; the token names the node.
 *   client-cert      `--client-ca FILE`: a TLS client certificate issued by that CA; its subject
 *                    CN names the node (collector/agent-cert-auth.ts).
 *   service-account  `--token-review`: the agent's projected ServiceAccount token, checked by the
 *                    Kubernetes TokenReview API; the node is the node of the pod the token is bound
 *                    to, read from the API (collector/k8s/token-review.ts).
 *
 * A peer with a node identity can only send a hello for that node, use agent ids bound to that
 * node, and arm, report and number points of that node (collector/hub.ts).
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { readFileSync } from 'node:fs';
import { bearerToken, tokenDigest, tokenMatches } from '../common/auth';
import { HoptraceError } from '../common/errors';

export type IdentityMethod = 'shared-token' | 'node-token' | 'client-cert' | 'service-account';

export interface AgentIdentity {
  method: IdentityMethod;
  /** The node this peer may speak for; null only for the shared token (any node). */
  node: string | null;
  /** Who, for logs and GET /v1/agents (never a secret). */
  subject: string;
}

/** The answer to one upgrade: an identity, or why not (for the log; the peer sees only 401/503). */
export type AuthResult =
  { ok: true; identity: AgentIdentity } | { ok: false; status: 401 | 503; reason: string };

/** What an authenticator reads of an upgrade request: its headers and its (TLS) socket. */
export interface AuthRequest {
  headers: IncomingHttpHeaders;
  socket?: unknown;
}

export interface AgentAuthenticator {
  /** What is accepted, for the start-up log line. */
  readonly description: string;
  authenticate(req: AuthRequest): AuthResult | Promise<AuthResult>;
}

const refused = (reason: string): AuthResult => ({ ok: false, status: 401, reason });

/** The shared bearer token: an identity for no node in particular. */
export function sharedTokenAuth(tokens: readonly string[]): AgentAuthenticator {
  return {
    description: 'the shared token (any holder may speak for any node)',
    authenticate(req) {
      return tokenMatches(bearerToken(req.headers.authorization), tokens)
        ? { ok: true, identity: { method: 'shared-token', node: null, subject: 'shared token' } }
        : refused('missing or wrong bearer token');
    },
  };
}

/**
 * A node name as Kubernetes spells one (RFC 1123 subdomain), or a lab's shorter name: what the
 * identities are issued for (token file, certificate CN). Each is also a name a hello may give
 * (common/agent-names.ts NODE_NAME_RE, which allows host names outside a cluster too).
 */
export const K8S_NODE_NAME_RE = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;

/**
 * `NODE TOKEN` per line (`#` comments, blank lines ignored). Throws AUTH_NO_TOKEN (what and which
 * line) for anything else: a node twice, a token shared by two nodes, a token shorter than 16
 * characters, a name that is not a node name.
 */
export function parseNodeTokens(text: string, where: string): Map<string, string> {
  const byNode = new Map<string, string>();
  const seen = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const bad = (why: string): never => {
      throw new HoptraceError('AUTH_NO_TOKEN', `line ${i + 1}: ${why}`, {
        where,
        hint: 'one "NODE TOKEN" per line, e.g. `node-a 3f9c…` (openssl rand -hex 32 makes a token)',
      });
    };
    const parts = line.split(/\s+/);
    const [node, token] = parts;
    if (parts.length !== 2 || node === undefined || token === undefined) bad('not "NODE TOKEN"');
    else if (!K8S_NODE_NAME_RE.test(node)) bad(`'${node.slice(0, 64)}' is not a node name`);
    else if (token.length < 16) bad(`the token of ${node} is shorter than 16 characters`);
    else if (byNode.has(node)) bad(`${node} is listed twice`);
    else if (seen.has(token)) bad(`${node} has the token of another node`);
    else {
      byNode.set(node, token);
      seen.add(token);
    }
  });
  if (byNode.size === 0)
    throw new HoptraceError('AUTH_NO_TOKEN', 'the agent token file lists no node', { where });
  return byNode;
}

export function readNodeTokens(file: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const reason = e instanceof Error && 'code' in e ? String(e.code) : 'unreadable';
    throw new HoptraceError('AUTH_NO_TOKEN', `cannot read the agent token file (${reason})`, {
      where: file,
      hint: 'give a readable file of "NODE TOKEN" lines',
    });
  }
  return parseNodeTokens(text, file);
}

/**
 * One token per node. Every token is compared (in constant time, over fixed-length digests) so
 * the time does not say which node's token was close.
 */
export function nodeTokenAuth(byNode: ReadonlyMap<string, string>): AgentAuthenticator {
  const table = [...byNode].map(([node, token]) => ({ node, d: tokenDigest(token) }));
  return {
    description: `one token per node (${table.length} nodes)`,
    authenticate(req) {
      const given = bearerToken(req.headers.authorization);
      if (given === undefined || given === '') return refused('no bearer token');
      const g = tokenDigest(given);
      let node: string | undefined;
      for (const row of table) if (timingSafeEqual(g, row.d)) node = row.node;
      return node === undefined
        ? refused('not the token of any node')
        : { ok: true, identity: { method: 'node-token', node, subject: `node token of ${node}` } };
    },
  };
}

/**
 * Several ways in, tried in order; the first that accepts wins. A refusal from one is not final
 * (the next may accept); a 503 (the API server could not be asked) is kept over a 401.
 */
export function chainAuth(parts: readonly AgentAuthenticator[]): AgentAuthenticator {
  return {
    description: parts.map((p) => p.description).join('; ') || 'nothing (every agent is refused)',
    async authenticate(req) {
      const reasons: string[] = [];
      let unavailable = false;
      for (const p of parts) {
        const r = await p.authenticate(req);
        if (r.ok) return r;
        reasons.push(r.reason);
        if (r.status === 503) unavailable = true;
      }
      const reason = reasons.join('; ') || 'no way of authenticating agents is configured';
      return { ok: false, status: unavailable ? 503 : 401, reason };
    },
  };
}

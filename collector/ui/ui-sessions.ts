/**
 * The web view's logins: the API token is entered once in a form; the collector answers with a
 * random session id in an HttpOnly, SameSite=Strict cookie (Secure over TLS), never the token and
 * never in a URL. Sessions live in memory (a restart asks to log in again), expire after
 * SESSION_TTL_MS and are bounded in number (the oldest goes). The clock is passed in.
 */
import { randomBytes } from 'node:crypto';
import { tokenMatches } from '../../common/auth';

export const SESSION_COOKIE = 'hoptrace_ui';
export const SESSION_TTL_MS = 12 * 3600_000;
export const MAX_SESSIONS = 1000;

export class UiSessions {
  /** session id → expiry (ms); Map order is insertion order, so the first is the oldest. */
  private readonly sessions = new Map<string, number>();

  constructor(
    private readonly tokens: readonly string[],
    private readonly nowMs: () => number = Date.now,
    private readonly secure = false,
  ) {}

  /** A new session id for a right token, else null (compared in constant time). */
  login(token: string): string | null {
    if (!tokenMatches(token, this.tokens)) return null;
    const now = this.nowMs();
    for (const [id, exp] of this.sessions) if (exp <= now) this.sessions.delete(id);
    while (this.sessions.size >= MAX_SESSIONS) {
      const oldest = this.sessions.keys().next().value;
      if (oldest === undefined) break;
      this.sessions.delete(oldest);
    }
    const id = randomBytes(24).toString('base64url');
    this.sessions.set(id, now + SESSION_TTL_MS);
    return id;
  }

  /** The session id of a `Cookie` header when it names a live session, else null. */
  check(cookieHeader: string | undefined): string | null {
    const id = cookieValue(cookieHeader, SESSION_COOKIE);
    if (id === null) return null;
    const exp = this.sessions.get(id);
    if (exp === undefined) return null;
    if (exp <= this.nowMs()) {
      this.sessions.delete(id);
      return null;
    }
    return id;
  }

  logout(id: string): void {
    this.sessions.delete(id);
  }

  /** The Set-Cookie value that starts (or, with null, ends) a session. */
  cookie(id: string | null): string {
    const attrs = ['Path=/ui', 'HttpOnly', 'SameSite=Strict', ...(this.secure ? ['Secure'] : [])];
    return id === null
      ? `${SESSION_COOKIE}=; Max-Age=0; ${attrs.join('; ')}`
      : `${SESSION_COOKIE}=${id}; Max-Age=${SESSION_TTL_MS / 1000}; ${attrs.join('; ')}`;
  }
}

/** One cookie's value from a `Cookie` header (RFC 6265 §5.4), or null. */
export function cookieValue(header: string | undefined, name: string): string | null {
  if (header === undefined) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      const v = part.slice(eq + 1).trim();
      return /^[A-Za-z0-9_-]{1,64}$/.test(v) ? v : null;
    }
  }
  return null;
}

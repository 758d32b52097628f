/**
 * The web view's pages, rendered on the server: plain HTML with inline CSS, no script, no external
 * asset (the Content-Security-Policy in ui-routes.ts forbids both). A running capture or repro
 * page refreshes itself every two seconds (`<meta http-equiv="refresh">`). Pure: views and the
 * current time in, HTML out.
 */
import type { AnalysisResult } from '../../core/report/analysis-result';
import { renderVerdictText } from '../../core/report/report';
import type { CaptureView } from '../capture-views';
import type { ReproView } from '../repro-state';
import { REPRO_TIMES_NOTE } from '../../core/repro/repro-core';

/** Text for HTML element content and attribute values. */
export function esc(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const CSS = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#12263a;color:#fff;padding:.6em 1.2em;display:flex;gap:1.5em;align-items:center}
header a{color:#fff;text-decoration:none}header form{margin-left:auto}
main{padding:1em 1.5em;max-width:1200px}
h1{font-size:1.35em;margin:.2em 0 .6em}h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse;background:#fff;margin:.3em 0}
th,td{border:1px solid #d5d9de;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef1f4}code,pre{font-family:ui-monospace,monospace;font-size:12.5px}
pre{background:#fff;border:1px solid #d5d9de;padding:.7em;overflow-x:auto;white-space:pre-wrap}
.state{font-weight:600}.verdict{font-size:1.15em;font-weight:600}
.resolved,.finished{color:#1a7f37}.failed,.timeout,.cancelled{color:#b42318}.capturing,.arming,.running,.settling{color:#9a6700}
.picture{background:#fff;border:1px solid #d5d9de;padding:.5em;overflow-x:auto}
.note{color:#57606a}.error{color:#b42318;font-weight:600}
button,input{font:inherit}`;

function page(
  title: string,
  body: string,
  opts: { refresh?: boolean; loggedIn?: boolean } = {},
): string {
  const refresh = opts.refresh === true ? '<meta http-equiv="refresh" content="2">' : '';
  const logout =
    opts.loggedIn === false
      ? ''
      : '<form method="post" action="/ui/logout"><button type="submit">log out</button></form>';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">${refresh}
<title>${esc(title)} · hoptrace</title><style>${CSS}</style></head>
<body><header><a href="/ui/"><strong>hoptrace</strong></a><a href="/ui/">captures and repros</a>${logout}</header>
<main>${body}</main></body></html>
`;
}

/** The login form; `error` after a wrong token. */
export function loginPage(error: string | null, next: string): string {
  return page(
    'log in',
    `<h1>Log in</h1>
<p>Enter the collector's API token (the collector token file, or HOPTRACE_TOKEN). It is sent once; the browser keeps only a session cookie.</p>
${error === null ? '' : `<p class="error">${esc(error)}</p>`}
<form method="post" action="/ui/login">
<input type="hidden" name="next" value="${esc(next)}">
<label>token <input type="password" name="token" autocomplete="current-password" required autofocus size="48"></label>
<button type="submit">log in</button>
</form>`,
    { loggedIn: false },
  );
}

/** `3 s`, `4 min`, `2 h`, `5 d` between an ISO time and now. */
export function age(iso: string, nowMs: number): string {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return '?';
  const s = Math.max(0, Math.round((nowMs - t) / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

const stateCell = (s: string): string => `<span class="state ${esc(s)}">${esc(s)}</span>`;

/** What the list does not show, or shows held in memory only (GET /v1/captures and /v1/repros). */
export interface ListCounts {
  /** Finished captures not held in memory: not listed, still opened by id from the data directory. */
  olderCaptures: number;
  olderRepros: number;
  /** Finished repros held in memory only: not in the data directory. */
  pinnedRepros: number;
}

const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;

/** The line saying that `n` older finished ones exist and how to open one, or '' when none. */
function olderLine(n: number, what: 'capture' | 'repro'): string {
  if (n === 0) return '';
  const listed = plural(n, `older finished ${what} is`, `older finished ${what}s are`);
  return `<p class="note older">${listed} not listed (no longer held in memory, still in the data directory); open one by id: <code>/ui/${what}s/&lt;id&gt;</code>.</p>`;
}

/** `/ui/`: captures and repros, newest first; what the lists leave out said below them. */
export function listPage(
  captures: CaptureView[],
  repros: ReproView[],
  nowMs: number,
  counts: ListCounts,
): string {
  const byNew = <T extends { createdAt: string }>(xs: T[]): T[] =>
    [...xs].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  const caps = byNew(captures)
    .map(
      (c) =>
        `<tr><td><a href="/ui/captures/${encodeURIComponent(c.id)}">${esc(c.id)}</a></td><td>${stateCell(c.state)}</td><td>${esc(c.verdict?.layer ?? (c.progress.requestSeen ? `request seen (${c.progress.layer ?? '?'})` : '—'))}</td><td>${esc(c.request.client ?? 'any client')}</td><td>${esc(c.points.map((p) => p.name).join(' → '))}</td><td title="${esc(c.createdAt)}">${age(c.createdAt, nowMs)}</td></tr>`,
    )
    .join('\n');
  const reps = byNew(repros)
    .map((r) => {
      const s = r.summary;
      const outcome =
        s === null
          ? '—'
          : s.recovered
            ? `recovered (${s.brokenMs ?? '?'} ms broken)`
            : 'not recovered';
      return `<tr><td><a href="/ui/repros/${encodeURIComponent(r.id)}">${esc(r.id)}</a></td><td>${stateCell(r.state)}</td><td>${esc(outcome)}</td><td>${r.timeline.length}</td><td title="${esc(r.createdAt)}">${age(r.createdAt, nowMs)}</td></tr>`;
    })
    .join('\n');
  const pinned =
    counts.pinnedRepros === 0
      ? ''
      : `<p class="error pinned">${plural(counts.pinnedRepros, 'finished repro is', 'finished repros are')} held in memory only: their bundle or view is not in the data directory (writing it there failed: STORE_IO in the collector's log), and what is not there is gone when the collector stops — download their bundles now.</p>`;
  // "None yet" only when there is none at all: older ones are in the data directory.
  const noCaptures =
    counts.olderCaptures === 0
      ? '<p class="note">No captures yet: start one with <code>hoptrace capture</code>.</p>'
      : '';
  const noRepros =
    counts.olderRepros === 0
      ? '<p class="note">No repros yet: <code>hoptrace repro</code>.</p>'
      : '';
  return page(
    'captures',
    `<h1>Captures</h1>
${caps === '' ? noCaptures : `<table class="captures"><thead><tr><th>id</th><th>state</th><th>verdict</th><th>client</th><th>points</th><th>age</th></tr></thead><tbody>${caps}</tbody></table>`}${olderLine(counts.olderCaptures, 'capture')}
<h2>Repros</h2>
${reps === '' ? noRepros : `<table class="repros"><thead><tr><th>id</th><th>state</th><th>outcome</th><th>probes</th><th>age</th></tr></thead><tbody>${reps}</tbody></table>`}${olderLine(counts.olderRepros, 'repro')}${pinned}`,
    { refresh: [...captures, ...repros].some((x) => !isFinal(x.state)) },
  );
}

const FINAL = new Set(['resolved', 'timeout', 'cancelled', 'failed', 'finished']);
const isFinal = (state: string): boolean => FINAL.has(state);

function pointsTable(v: CaptureView): string {
  const rows = v.points
    .map(
      (p) =>
        `<tr><td>${esc(p.name)}</td><td>${esc(p.node ?? '?')}</td><td><code>${esc(p.target)}:${esc(p.iface)}</code></td><td>${stateCell(p.state)}</td><td>${p.packets}</td><td>${p.events}</td><td>${p.kernelDrops === null ? 'unknown' : p.kernelDrops}</td><td>${p.queueDrops}</td><td>${p.lost}</td><td>${p.error === undefined ? '' : `<span class="error">${esc(p.error.code)}</span> ${esc(p.error.message)}`}</td></tr>`,
    )
    .join('\n');
  return `<table class="points"><thead><tr><th>point</th><th>node</th><th>target</th><th>state</th><th>packets</th><th>events</th><th>kernel drops</th><th>agent drops</th><th>events lost</th><th>error</th></tr></thead><tbody>${rows}</tbody></table>`;
}

/** One downloadable form of a capture's bundle. */
export interface BundleFile {
  name: string;
  /** What it is, for the link's text. */
  label: string;
}

/** `/ui/captures/:id`: per-point progress while it runs, then the verdict, the picture, the files. */
export function capturePage(
  v: CaptureView,
  result: AnalysisResult | null,
  svg: string | null,
  files: readonly BundleFile[],
): string {
  const final = isFinal(v.state);
  const head = `<h1>Capture ${esc(v.id)}</h1>
<p>${stateCell(v.state)}${v.finalReason === null ? '' : ` — ${esc(v.finalReason)}`} · created ${esc(v.createdAt)}${v.finishedAt === null ? '' : ` · finished ${esc(v.finishedAt)}`} · client ${esc(v.request.client ?? 'any')}${v.request.dst === null ? '' : ` → ${esc(v.request.dst)}${v.request.dport === null ? '' : `:${v.request.dport}`}`}</p>`;
  const progress = final
    ? ''
    : `<p class="note">${v.progress.requestSeen ? `request seen (${esc(v.progress.layer ?? '?')}); waiting for the verdict` : 'waiting for the request'} — this page refreshes every 2 s.</p>`;
  const verdict =
    result === null
      ? final
        ? '<p class="note">No verdict was reached (see the points below).</p>'
        : ''
      : `<h2>Verdict</h2><p class="verdict layer-${esc(result.verdict.layer)}">${esc(result.verdict.layer)}</p><pre class="verdict-text">${esc(renderVerdictText(result))}</pre>`;
  const picture =
    svg === null ? '' : `<h2>The request's path</h2><div class="picture">${svg}</div>`;
  const downloads =
    files.length === 0
      ? ''
      : `<h2>Evidence bundle</h2><ul class="files">${files.map((f) => `<li><a href="/ui/captures/${encodeURIComponent(v.id)}/files/${encodeURIComponent(f.name)}">${esc(f.name)}</a> — ${esc(f.label)}</li>`).join('')}</ul>`;
  return page(
    `capture ${v.id}`,
    `${head}${progress}${verdict}${picture}<h2>Points</h2>${pointsTable(v)}${downloads}`,
    { refresh: !final },
  );
}

/** `/ui/repros/:id`: the timeline (picture and text), refreshed while it runs. */
export function reproPage(
  r: ReproView,
  svg: string | null,
  files: readonly { name: string; label: string }[],
): string {
  const final = isFinal(r.state);
  const s = r.summary;
  const outcome =
    s === null
      ? ''
      : `<p class="verdict ${s.recovered ? 'finished' : 'failed'}">${s.recovered ? `recovered; broken for ${s.brokenMs ?? '?'} ms` : 'NOT recovered'}</p><p>${esc(s.why)}</p>`;
  const attachments = r.attachments
    .map(
      (a) =>
        `<tr><td>${a.epoch}</td><td>${esc(a.pod.name)}</td><td>${esc(a.pod.ip)}</td><td>${esc(a.pod.node)}</td><td>${esc(a.attachedAt)}</td><td>${esc(a.detachedAt ?? '—')}</td></tr>`,
    )
    .join('');
  return page(
    `repro ${r.id}`,
    `<h1>Repro ${esc(r.id)}</h1><p>${stateCell(r.state)} · created ${esc(r.createdAt)}${r.finishedAt === null ? '' : ` · finished ${esc(r.finishedAt)}`}</p>
${final ? '' : '<p class="note">Running — this page refreshes every 2 s.</p>'}${outcome}
${svg === null ? '' : `<h2>Timeline</h2><div class="picture">${svg}</div>`}
<h2>Probes</h2><pre class="timeline">${esc(r.text.join('\n'))}</pre><p class="note">${esc(REPRO_TIMES_NOTE)}</p>
<h2>Evidence bundle</h2>${r.bundle === undefined ? '' : `<p class="note bundle ${esc(r.bundle.state)}">${esc(`${r.bundle.state}: ${r.bundle.detail}`)}</p>`}<ul class="files">${files.map((f) => `<li><a href="/ui/repros/${encodeURIComponent(r.id)}/files/${encodeURIComponent(f.name)}">${esc(f.name)}</a> — ${esc(f.label)}</li>`).join('')}</ul>
<h2>VPN pods</h2><table><thead><tr><th>#</th><th>pod</th><th>IP</th><th>node</th><th>attached</th><th>detached</th></tr></thead><tbody>${attachments}</tbody></table>`,
    { refresh: !final },
  );
}

/** A page for a UI error (not found, bad request). */
export function errorPage(status: number, message: string): string {
  return page(
    `error ${status}`,
    `<h1>${status}</h1><p class="error">${esc(message)}</p><p><a href="/ui/">back to the list</a></p>`,
  );
}

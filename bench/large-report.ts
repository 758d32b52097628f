/**
 * BENCHMARKS.md's section for the large three-point case (bench/large-files.ts) and its goal rows
 * (issue 20, goal 2): analyze ≤ 2× `cat`, ≥ 20× faster than `tcpdump -nn -r` with and without
 * TZ, memory flat from the smallest scale to the largest.
 */
import type { LargeFileResult } from './large-files';
import { fmt, median, ratio } from './proc';
import type { Goal } from './goal';

function table(head: string[], rows: string[][]): string {
  const line = (c: string[]): string => `| ${c.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

/** "median (lo–hi)" of a per-trial ratio: load that comes and goes moves both sides of a trial. */
function perTrial(l: LargeFileResult, f: (t: LargeFileResult['trials'][number]) => number): string {
  const xs = l.trials.map(f).sort((a, b) => a - b);
  return `trial by trial ${fmt(median(xs), 2)}× (${fmt(xs[0], 2)}–${fmt(xs[xs.length - 1], 2)}×)`;
}

/**
 * Where the two-core floor (floor-walk.c -2 and Node's start) stands against the goal of 2× cat,
 * in words: from this run's figures, with and without NODE_EXTRA_CA_CERTS where both were measured.
 */
function floorWords(m: LargeFileResult['median']): string {
  if (m.cFloor2S === undefined) return 'not measured';
  const x = (start: number): number => ((m.cFloor2S ?? 0) + start) / m.catS;
  const asRun = x(m.nodeStartS) <= 2;
  const unset = m.nodeStartNoCaS === undefined ? asRun : x(m.nodeStartNoCaS) <= 2;
  if (asRun && unset)
    return "below the goal in this run: what keeps analyze above it is its own work (decoding every frame's headers for the counts, the passes in series, Node's own work)";
  if (!asRun && !unset)
    return "above the goal in this run, before anything is decoded: this machine's Node start and reads leave no room for it";
  return asRun
    ? 'below the goal as the run was, above it with NODE_EXTRA_CA_CERTS unset (the trials moved that much)'
    : "above the goal as the run was (Node's start includes NODE_EXTRA_CA_CERTS), below it without: the goal sits at this machine's floor";
}

/** Where the probe request sits in each file. */
function probeText(l: LargeFileResult): string {
  const at = l.probeFrame ?? 1000;
  const share = at / l.framesPerPoint;
  return `the probe request's SYN frame ${fmt(at + 1)} of each (${fmt(100 * share, share < 0.01 ? 3 : 0)} % in${
    l.probeFrame === undefined ? "; this run predates the probe's move to three quarters in" : ''
  })`;
}

/** analyze and Node's start with NODE_EXTRA_CA_CERTS unset, where the run had it set. */
function noCaText(m: LargeFileResult['median']): string {
  if (m.nodeStartNoCaS === undefined || m.analyzeNoCaS === undefined) return '';
  return `; this machine sets NODE_EXTRA_CA_CERTS, which Node parses at every start: with it unset Node's start is ${fmt(m.nodeStartNoCaS, 2)} s and analyze ${fmt(m.analyzeNoCaS, 2)} s, ${fmt(m.analyzeNoCaS / m.catS, 2)}× cat`;
}

/** The section, pushing its goals onto `goals`. */
export function largeFileSection(l: LargeFileResult, goals: Goal[]): string {
  const m = l.median;
  const gib = l.totalMiB / 1024;
  const msPerMiB = (s: number): string => fmt((1000 * s) / l.totalMiB, 2);
  const xCat = m.analyzeS / m.catS;
  const xNn = m.tcpdumpS / m.analyzeS;
  const xTz = m.tcpdumpTzS / m.analyzeS;
  const size = `${fmt(gib, 2)} GiB in three point files`;
  goals.push(
    {
      goal: '`analyze` ≤ 2× `cat` of the same files (≥ 1.5 GiB, three points, page cache warm)',
      result: `${size}: analyze ${fmt(m.analyzeS, 2)} s vs cat ${fmt(m.catS, 2)} s, ${fmt(xCat, 2)}×, ${perTrial(l, (t) => t.analyze.wallS / t.cat.wallS)} (Node's start ${fmt(m.nodeStartS, 2)} s of it; without it ${fmt((m.analyzeS - m.nodeStartS) / m.catS, 2)}×)${noCaText(m)}; bench/floor-walk.ts — Node's start, the same reads, the record headers walked in JavaScript, nothing decoded — ${fmt(m.floorS, 2)} s, ${fmt(m.floorS / m.catS, 2)}× cat${m.cFloorS === undefined ? '' : `; the same walk in C on one core, no Node (bench/floor-walk.c), ${fmt(m.cFloorS, 2)} s, ${fmt(m.cFloorS / m.catS, 2)}× cat: with Node's start ${fmt((m.cFloorS + m.nodeStartS) / m.catS, 2)}×`}${m.cFloor2S === undefined ? '' : `; in analyze's order on two cores (the first file, then the others on two threads: floor-walk.c -2) ${fmt(m.cFloor2S, 2)} s, ${fmt(m.cFloor2S / m.catS, 2)}× cat, with Node's start ${fmt((m.cFloor2S + m.nodeStartS) / m.catS, 2)}×${m.nodeStartNoCaS === undefined ? '' : ` (${fmt((m.cFloor2S + m.nodeStartNoCaS) / m.catS, 2)}× with NODE_EXTRA_CA_CERTS unset)`} — the least an analysis that looks at every record takes here: ${floorWords(m)}`}`,
      met: xCat <= 2 && gib >= 1.5 ? 'met' : 'missed',
    },
    {
      goal: '`analyze` ≥ 20× faster than `tcpdump -nn -r` over the same files, TZ unset',
      result: `tcpdump -nn -r ${fmt(m.tcpdumpS, 1)} s (each file once, summed) vs analyze ${fmt(m.analyzeS, 2)} s: ${fmt(xNn, 1)}×, ${perTrial(l, (t) => t.tcpdumpS / t.analyze.wallS)}`,
      met: xNn >= 20 && gib >= 1.5 ? 'met' : 'missed',
    },
    {
      goal: '`analyze` ≥ 20× faster than `tcpdump -nn -r` over the same files, TZ=UTC',
      result: `tcpdump -nn -r ${fmt(m.tcpdumpTzS, 1)} s vs analyze ${fmt(m.analyzeS, 2)} s: ${fmt(xTz, 1)}×, ${perTrial(l, (t) => t.tcpdumpTzS / t.analyze.wallS)}`,
      met: xTz >= 20 && gib >= 1.5 ? 'met' : 'missed',
    },
  );
  const known = l.rss.filter((r) => r.peakRssMiB !== null);
  const first = known[0];
  const last = known[known.length - 1];
  if (first !== undefined && last !== undefined && first !== last) {
    const grow = (last.peakRssMiB ?? 0) / Math.max(1, first.peakRssMiB ?? 1);
    goals.push({
      goal: '`analyze` memory flat (no growth for 10× the input)',
      result: `peak RSS ${known.map((r) => `${fmt(r.peakRssMiB)} MiB at ${fmt(r.totalMiB)} MiB`).join(', ')}: ${fmt(grow, 2)}× for ${fmt(last.totalMiB / first.totalMiB, 1)}× the input`,
      met: grow <= 1.1 ? 'met' : 'missed',
    });
  }
  /** A timed command's row: its wall time, per MiB, against cat and against tcpdump -nn. */
  const timed = (label: string, wallS: number): string[] => [
    label,
    fmt(wallS, 2),
    '–',
    '–',
    msPerMiB(wallS),
    ratio(wallS, m.catS),
    ratio(m.tcpdumpS, wallS, 1),
  ];
  const rows: string[][] = [
    ['cat (the three files)', fmt(m.catS, 2), '–', '–', msPerMiB(m.catS), '1.00×', '–'],
    [
      'hoptrace analyze (3 points)',
      fmt(m.analyzeS, 2),
      fmt(m.analyzeCpuS, 2),
      fmt(m.analyzeRssMiB),
      msPerMiB(m.analyzeS),
      ratio(m.analyzeS, m.catS),
      ratio(m.tcpdumpS, m.analyzeS, 1),
    ],
    ...(m.bundleS === undefined
      ? []
      : [
          [
            'hoptrace analyze --report-dir (+ inputs’ SHA-256, evidence.pcapng, reports)',
            fmt(m.bundleS, 2),
            m.bundleCpuS === undefined ? '–' : fmt(m.bundleCpuS, 2),
            m.bundleRssMiB === undefined ? '–' : fmt(m.bundleRssMiB),
            msPerMiB(m.bundleS),
            ratio(m.bundleS, m.catS),
            ratio(m.tcpdumpS, m.bundleS, 1),
          ],
        ]),
    ...(m.sha256sumS === undefined ? [] : [timed('sha256sum (the three files)', m.sha256sumS)]),
    timed('hoptrace analyze less Node’s start', m.analyzeS - m.nodeStartS),
    ['node -e 0 (Node’s start alone)', fmt(m.nodeStartS, 2), '–', '–', '–', '–', '–'],
    ...(m.nodeStartNoCaS === undefined || m.analyzeNoCaS === undefined
      ? []
      : [
          timed('hoptrace analyze, NODE_EXTRA_CA_CERTS unset', m.analyzeNoCaS),
          [
            'node -e 0, NODE_EXTRA_CA_CERTS unset',
            fmt(m.nodeStartNoCaS, 2),
            '–',
            '–',
            '–',
            '–',
            '–',
          ],
        ]),
    timed('node floor-walk (reads + record headers, nothing decoded)', m.floorS),
    ...(m.cFloorS === undefined
      ? []
      : [timed('C floor-walk (128 KiB reads + record headers, one core, no Node)', m.cFloorS)]),
    ...(m.cFloor2S === undefined
      ? []
      : [
          timed(
            'C floor-walk -2 (the first file, then the others on two threads, no Node)',
            m.cFloor2S,
          ),
        ]),
    [
      'tcpdump -nn -r, each file (TZ unset)',
      fmt(m.tcpdumpS, 2),
      '–',
      '–',
      msPerMiB(m.tcpdumpS),
      ratio(m.tcpdumpS, m.catS, 1),
      '1.0×',
    ],
    [
      'tcpdump -nn -r, each file (TZ=UTC)',
      fmt(m.tcpdumpTzS, 2),
      '–',
      '–',
      msPerMiB(m.tcpdumpTzS),
      ratio(m.tcpdumpTzS, m.catS, 1),
      ratio(m.tcpdumpS, m.tcpdumpTzS, 1),
    ],
  ];
  const trialRows = l.trials.map((t, i) => [
    String(i + 1),
    fmt(t.cat.wallS, 2),
    fmt(t.analyze.wallS, 2),
    fmt(t.analyze.peakRssMiB),
    fmt(t.tcpdumpS, 1),
    fmt(t.tcpdumpTzS, 1),
    fmt(t.nodeStartS, 2),
    fmt(t.floorS, 2),
    t.cFloorS === undefined ? '–' : fmt(t.cFloorS, 2),
    t.cFloor2S === undefined ? '–' : fmt(t.cFloor2S, 2),
    t.bundle === undefined ? '–' : fmt(t.bundle.wallS, 2),
    t.sha256sumS === undefined ? '–' : fmt(t.sha256sumS, 2),
  ]);
  const rssRows = l.rss.map((r) => [
    `${r.scale}×`,
    fmt(r.framesPerPoint),
    fmt(r.totalMiB),
    fmt(r.wallS, 2),
    fmt(r.peakRssMiB),
  ]);
  return `## 3b. Large three-point capture: \`analyze\` vs \`cat\` and \`tcpdump -nn -r\`

Three distinct point files written by bench/pcap-writer.ts (BENCH_POINTS: decap and egress see
client → service, the backend client → pod, each with background flows of its own and its own
clock offset), ${fmt(l.framesPerPoint)} frames each, ${fmt(l.totalMiB)} MiB in all, ${probeText(l)}, in a temp
dir removed afterwards. After one warming \`cat\`, ${l.trials.length} back-to-back trials of: \`cat\`
of the three files, \`hoptrace analyze\` over them (verdict \`${l.analyzeLayer ?? 'none'}\`), the same with
\`--report-dir\` (the bundle a user attaches), \`sha256sum\` of the three files,
\`tcpdump -nn -r\` over each file once (summed) with TZ unset, then with TZ=UTC, \`node -e 0\`,
bench/floor-walk.ts over the three files (analyze's 2 MiB reads and a walk over the record headers),
bench/floor-walk.c (the same walk in C, 128 KiB reads, one core, and with \`-2\` in analyze's order
on two cores), and — where the environment sets NODE_EXTRA_CA_CERTS — \`node -e 0\` and analyze with
it unset; medians below. Measured ${l.date}, load average ${l.loadBefore} before, ${l.loadAfter} after.

${table(['command', 'wall s (median)', 'CPU s', 'peak RSS MiB', 'ms per MiB', '÷ cat', 'tcpdump -nn (TZ unset) ÷ this'], rows)}

${table(['trial', 'cat s', 'analyze s', 'analyze MiB', 'tcpdump -nn s', 'TZ=UTC s', 'node -e 0 s', 'floor-walk s', 'C floor-walk s', 'C floor-walk -2 s', '--report-dir s', 'sha256sum s'], trialRows)}

analyze's peak RSS by input size (the other sizes measured once, after the trials, with
\`--parallel on\`: the 1× trials' way of reading, a worker thread for the later points, which by
default starts only from 64 MiB a file and holds ~11 MiB of its own):

${table(['scale', 'frames per point', 'MiB in all', 'analyze wall s', 'peak RSS MiB'], rssRows)}

What limits analyze here. Before a byte is read: Node's start (the \`node -e 0\` row; on this
machine it includes parsing every certificate of NODE_EXTRA_CA_CERTS, which the environment sets —
the "unset" rows show it) and loading analyze's modules (~40 ms; the text report and the bundle's
modules are loaded only when asked for; 69 modules, 36–48 ms, none above ~4 ms — the addon's
load, \`node:net\`, \`node:worker_threads\` the largest. Measured by hand 2026-12-06 and not adopted:
the whole CLI bundled into one file with esbuild loads slower, 232 against 175 ms for an analyze
of small files, as V8 then parses every command's code; \`v8-compile-cache\` costs ~10 ms to load
and saves none of the ~36 ms; Node 20 has no built-in compile cache). Then the same copy out of the page cache that \`cat\`
makes, into a reused 2 MiB buffer per thread (a page touched for the first time costs ~10 µs on
this VM, so buffers are reused across passes), and every frame's headers decoded once in C,
because the report counts every useful frame at every point. The summarizer's gate
(offline/summary-gate.ts) gives a summary record, payload hashes and JavaScript only to the frames
a pass can use: at the first point new connections and the chosen SYN's flow; at later points the
request's transport within ±10 s of it (the bench files hold 100 k frames a second: ~2 M frames a
file with the probe three quarters in, ~1 M when it was 10 ms in: by hand, interleaved, the same
build over both placements took 0.58–0.64 s against 0.54–0.60 s), and of those not the data segments the
later-point selection would pass over (QUIET), which are recognised from their bytes and hashed
in C without a record (summary.c quiet_quick: a later point's pass ~100 ms instead of ~120–125 on
these files). The first point must be read before the later ones (their pass needs the request it
chose); the later points are then read by this thread and a worker thread on the second core
(offline/pass-pool.ts), so the second core is idle during the first point's pass. A timeline of
one run with NODE_EXTRA_CA_CERTS unset (2026-12-06, by hand): Node ready at ~45 ms, modules until
~85 ms, the first point's pass ~115 ms, the later points ~100 ms here and ~110 ms there in
parallel, the identity headers re-read ~17 ms (with the probe at frame 1000; from the analysis's
resume points, offline/seek-points.ts, and reading past the frames before the request without
building them, 11–17 ms with it three quarters in — 1.5–1.7 s when that re-read started at each
file's first frame). In C alone (the same gate over 128 KiB reads) a
point's pass takes ~65–85 ms against ~38 ms for the reads: classifying every frame (the counts)
costs about as much as copying it. The C floor-walk rows are what walking every record takes with
no decoding at all; in analyze's order on two cores, with Node's start, that floor is
${floorWords(m)}. Not tried: splitting the first point's file between the two cores (a verified
record boundary, the second half's SYNs and marks replayed in order) — at most ~half a point's pass
(~50 ms) here, since a worker thread needs ~50 ms to start.

The bound with every pass perfectly parallel (by hand, 2026-12-07, this VM, the 1.52 GiB files;
NODE_EXTRA_CA_CERTS set as the environment has it): \`cat\` 0.11 s, analyze 0.40–0.42 s, so the
goal is ≤ 0.22 s. Node is ready at ~86 ms and analyze's modules at ~135 ms; the first point's pass
takes ~90–95 ms and a later point's ~118 ms when it runs alone (two-point analyses: decap+egress,
decap+backend, egress+backend all ~118 ms), so the three passes are ~330 ms of one core. Spread
perfectly over both cores from the moment the modules are loaded (the first point split in two, the
later points overlapped with it, none of it verified), the passes end no sooner than ~135 + 165 =
~300 ms, and the identity-header re-read (~11 ms) and the report (~17 ms) follow: ~0.33 s, 3×
\`cat\`. Reading with mmap instead of copying does not lower it here: a C walk over the mmapped
record headers of one 543 MB file took 0.42 s against the 128 KiB reads' ~65 ms (each record's
first touch of a page costs a nested-paging TLB miss on this VM; 2,650 page faults only). Goal 2
stays out of reach on this machine with a Node CLI: what remains above the bound is Node's start
and the per-frame classification the counts need.

What \`--report-dir\` adds: the SHA-256 of every input byte (the report's proof of which bytes the
verdict came from) — Node's OpenSSL with the CPU's SHA instructions, ~0.6 ms per MiB here, several
times faster than \`sha256sum\` (the row above) — hashed on a worker thread beside the analysis
(offline/digest-pool.ts: the worker takes the files one at a time, this thread the rest once its
analysis is done), then evidence.pcapng read from the resume points and the reports written.
Hashing ~1.5 GiB is ~0.95 s of CPU, twice the analysis: on two cores that, not the analysis,
sets the bundle's time. Before 2026-12-06 21:10 UTC the files were hashed before the analysis
began: by hand, interleaved, 1.55–1.63 s against 1.05–1.10 s now on these files.
`;
}

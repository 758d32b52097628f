/**
 * A backend whose file holds frames of which none is the request's kind (a link type hoptrace does
 * not decode, or only other protocols: ARP, neighbour discovery) is what a drop looks like, as an
 * empty one is — but the reason says what the file holds, never "the backend capture holds no
 * packets at all" next to 2000 frames. (A first version made it unknown; the live lab's dropped
 * scenario then turned unknown whenever its backend capture caught one stray frame.)
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { BENCH_POINTS, writeBenchPcap } from '../../bench/pcap-writer';
import { analyzeFiles } from '../../offline/analyze-files';
import type { Inventory } from '../../common/inventory';

const EMPTY: Inventory = { nodes: {}, pods: {} };

function points(t: { teardown(fn: () => void): void }, backend: (bytes: Buffer) => Buffer) {
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-unread-'));
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  return (['decap', 'egress', 'backend'] as const).map((name) => {
    const file = join(dir, `${name}.pcap`);
    writeBenchPcap(file, 2000, 'unread01', 'pcap', BENCH_POINTS[name], 1500);
    if (name === 'backend') writeFileSync(file, backend(readFileSync(file)));
    return { name, file };
  });
}

for (const fast of [true, false]) {
  const how = fast ? 'native fast path' : 'JS reader and decoder';
  void t.test(`frames of a link type hoptrace does not decode: said so (${how})`, (t) => {
    const files = points(t, (b) => {
      b.writeUInt32LE(147, 20); // LINKTYPE_USER0
      return b;
    });
    const r = analyzeFiles({ points: files, inventory: EMPTY, selector: {} }, { fast });
    t.equal(r.verdict.layer, 'dropped');
    t.match(
      r.verdict.reason ?? '',
      /the backend capture holds 2000 frames, none a TCP segment, UDP datagram or ICMP echo that hoptrace could read/,
    );
    t.notMatch(JSON.stringify(r), /holds no packets at all/);
    t.equal(r.points[2]?.status, 'no-capture');
    t.match(r.points[2]?.detail ?? '', /^2000 frames were captured at backend/);
    t.end();
  });

  void t.test(`an empty backend file (no frames): what a drop looks like (${how})`, (t) => {
    const files = points(t, (b) => b.subarray(0, 24));
    const r = analyzeFiles({ points: files, inventory: EMPTY, selector: {} }, { fast });
    t.equal(r.verdict.layer, 'dropped');
    t.match(r.verdict.reason ?? '', /the backend capture holds no packets at all/);
    t.end();
  });
}

// A capture file names no node: points[].node is null (unknown), as captureHealth and
// clockOffsets say it, never "" (the events' empty context). A first version wrote "".
for (const fast of [true, false]) {
  void t.test(`files name no node: null everywhere (${fast ? 'fast' : 'JS'})`, (t) => {
    const r = analyzeFiles(
      { points: points(t, (b) => b), inventory: EMPTY, selector: {} },
      { fast },
    );
    t.equal(r.points[0]?.frame !== null, true, 'decap matched a packet');
    t.same(
      r.points.map((p) => p.node),
      [null, null, null],
    );
    t.same(
      r.captureHealth?.map((h) => h.node),
      [null, null, null],
    );
    t.end();
  });
}

/**
 * The floor under `hoptrace analyze` on classic pcap files: `node floor-walk.js FILE...` reads each
 * file as analyze does (2 MiB reads into one reused buffer) and walks its record headers, nothing
 * decoded, nothing kept, then prints the number of frames. No Node program that reads the same
 * files can take less time than this one on the same machine, so it tells how much of analyze's
 * time is Node itself and the reads, and how much is the analysis.
 */
import { closeSync, openSync, readSync } from 'node:fs';

const CHUNK = 2 << 20;

/** Frames in b[pos, end) whose records are whole; returns [frames, position after them]. */
function walk(b: Buffer, pos: number, end: number): [number, number] {
  let n = 0;
  let p = pos;
  while (p + 16 <= end) {
    const caplen = b.readUInt32LE(p + 8);
    if (p + 16 + caplen > end) break;
    p += 16 + caplen;
    n++;
  }
  return [n, p];
}

function frames(path: string, buf: Buffer): number {
  const fd = openSync(path, 'r');
  try {
    let total = 0;
    let carry = 0;
    let first = true;
    for (;;) {
      const got = readSync(fd, buf, carry, buf.length - carry, null);
      const end = carry + got;
      const [n, p] = walk(buf, first ? 24 : 0, end);
      first = false;
      total += n;
      if (got === 0) return total;
      buf.copy(buf, 0, p, end);
      carry = end - p;
    }
  } finally {
    closeSync(fd);
  }
}

const buf = Buffer.allocUnsafe(CHUNK);
let total = 0;
for (const path of process.argv.slice(2)) total += frames(path, buf);
process.stdout.write(`${total}\n`);

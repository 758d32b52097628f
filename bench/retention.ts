/**
 * The cost of frame retention (agent/capture/retention.ts, native/pcap-batch/src/retain.c), run
 * once by hand — never a timed assertion in a test:
 *
 *   sudo node dist/bench/retention.js [--rate 100000] [--seconds 3] [--rounds 3] [--frames 500000]
 *
 * 1. Live, native: the capture worker (NsCapture, native source, its defaults) on one veth of two
 *    bench namespaces while bench/udp-flood.c sends `rate` pps of 106-byte frames for `seconds`;
 *    its CPU (/proc schedstat, all threads) per delivered packet without retention, with it
 *    headers only (the default: each frame cut where its payload starts, at most 256 bytes) and
 *    with the payload (256 bytes a frame, as evidencePayload keeps; what every capture kept before
 *    headers-only retention), into a file unlinked in a temp directory, rounds alternating.
 * 2. Replay: FileSource over the benchmark's synthetic pcap (bench/pcap-writer.ts), this process's
 *    CPU per frame in the same three modes (the TypeScript writer, the cap fallback's too).
 * Prints a Markdown table.
 */
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { FileSource, NsCapture, type RetentionTarget } from '../agent';
import { Netns, delay, runCommand } from '../lab/netns';
import { buildFlood, parseFlood } from './capture';
import { writeBenchPcap } from './pcap-writer';
import { cpuNs, median } from './proc';
import { RX, setupVeth, TX } from './veth';

type Mode = 'off' | 'headers' | 'payload';
const MODES: readonly Mode[] = ['off', 'headers', 'payload'];
const MODE_TEXT: Record<Mode, string> = {
  off: 'off',
  headers: 'headers only (default)',
  payload: '256 B a frame (payload)',
};

interface Row {
  what: string;
  retention: Mode;
  packets: number;
  nsPerPacket: number;
  retained: number;
}

/** A fresh retention file, unlinked at once as the agent's are; closed by the caller. */
function retentionTarget(dir: string, i: number, payload: boolean): RetentionTarget {
  const path = join(dir, `r-${i}.pcap`);
  const fd = openSync(path, 'wx+');
  unlinkSync(path);
  return { fd, snaplen: 256, maxBytes: 64 * 1024 * 1024, ...(payload ? { payload } : {}) };
}

const modeOf = (retain: RetentionTarget | undefined): Mode =>
  retain === undefined ? 'off' : retain.payload === true ? 'payload' : 'headers';

async function liveTrial(
  lab: Netns,
  flood: string,
  rxMac: string,
  rate: number,
  seconds: number,
  retain: RetentionTarget | undefined,
): Promise<Row> {
  const cap = new NsCapture(
    { point: 'bench', node: 'bench', iface: 'vrx', source: 'native' },
    {
      netnsPath: `/run/netns/${lab.full(RX)}`,
      onWarning: () => undefined,
      ...(retain === undefined ? {} : { retain }),
    },
  );
  let delivered = 0;
  await cap.startEncoded(
    (chunk) => {
      delivered += chunk.count;
    },
    () => undefined,
  );
  const { stdout } = await runCommand('ip', ['netns', 'pids', lab.full(RX)]);
  const pid = Number(stdout.trim().split('\n')[0]);
  const cpu0 = cpuNs(pid) ?? 0;
  const args = ['vtx', '10.77.0.1', '10.77.0.2', rxMac, String(rate), String(seconds)];
  const out = await lab.exec(
    TX,
    flood,
    [...args, '64', '41000', '8', '0', '40000'],
    (seconds + 30) * 1000,
  );
  parseFlood(out.stdout);
  // Delivery comes in bursts (coalescing): wait until it stops growing for a second.
  let last = -1;
  for (let still = 0; still < 4;) {
    await delay(250);
    still = delivered === last ? still + 1 : 0;
    last = delivered;
  }
  const cpu1 = cpuNs(pid) ?? cpu0;
  await cap.stop();
  return {
    what: `live native, ${rate} pps`,
    retention: modeOf(retain),
    packets: delivered,
    nsPerPacket: (cpu1 - cpu0) / Math.max(1, delivered),
    retained: cap.stats().retention?.retained ?? 0,
  };
}

async function replayTrial(path: string, retain: RetentionTarget | undefined): Promise<Row> {
  const src = new FileSource(
    path,
    { point: 'bench', node: 'bench', iface: 'eth0' },
    { maxBatch: 4096, ...(retain === undefined ? {} : { retain }) },
  );
  let frames = 0;
  const c0 = process.cpuUsage();
  await new Promise<void>((resolve, reject) => {
    void src.start(
      (evs) => {
        frames += evs.length;
      },
      (err) => {
        if (err === null) resolve();
        else reject(err);
      },
    );
  });
  const c = process.cpuUsage(c0);
  return {
    what: 'replay (FileSource, TypeScript decoder)',
    retention: modeOf(retain),
    packets: frames,
    nsPerPacket: ((c.user + c.system) * 1000) / Math.max(1, frames),
    retained: src.stats().retention?.retained ?? 0,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '100000' },
      seconds: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '3' },
      frames: { type: 'string', default: '500000' },
    },
  });
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const dir = mkdtempSync(join(tmpdir(), 'hoptrace-bench-retention-'));
  const lab = new Netns();
  const rows: Row[] = [];
  const fds: number[] = [];
  let n = 0;
  const target = (mode: Mode): RetentionTarget | undefined => {
    if (mode === 'off') return undefined;
    const t = retentionTarget(dir, ++n, mode === 'payload');
    fds.push(t.fd);
    return t;
  };
  try {
    const pcap = join(dir, 'bench.pcap');
    writeBenchPcap(pcap, Number(values.frames), 'benchprobe');
    for (let r = 0; r < rounds; r++)
      for (const mode of MODES) rows.push(await replayTrial(pcap, target(mode)));
    const flood = await buildFlood(join(__dirname, '..', '..', 'bench', 'udp-flood.c'), dir);
    const rxMac = await setupVeth(lab);
    for (let r = 0; r < rounds; r++)
      for (const mode of MODES)
        rows.push(await liveTrial(lab, flood, rxMac, rate, seconds, target(mode)));
  } finally {
    for (const fd of fds) closeSync(fd);
    await lab.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
  const out = [
    '| run | retention | packets (median) | ns/packet (median of rounds) | each round | retained |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const what of [...new Set(rows.map((r) => r.what))]) {
    for (const mode of MODES) {
      const rs = rows.filter((r) => r.what === what && r.retention === mode);
      out.push(
        `| ${what} | ${MODE_TEXT[mode]} | ${median(rs.map((r) => r.packets))} | ${median(rs.map((r) => r.nsPerPacket)).toFixed(0)} | ${rs.map((r) => r.nsPerPacket.toFixed(0)).join(', ')} | ${median(rs.map((r) => r.retained))} |`,
      );
    }
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});

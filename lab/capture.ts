/**
 * tcpdump at one capture point inside a namespace: start, wait for "listening on", stop with
 * SIGINT after a drain. `--immediate-mode` matters: with TPACKET_V3 libpcap hands packets over
 * per ring block (tcpdump's default block timeout is 1 s), and a SIGINT 300 ms after the request
 * ends the loop before the block is delivered — the file would be empty although tcpdump's
 * stats say the filter received the packets.
 */
import type { ChildProcess } from 'node:child_process';
import { collect, stopChild, waitForLine } from './child';
import type { Netns } from './netns';

/** Where to capture. */
export interface CapturePoint {
  /** Point name as the analyzer sees it (decap, egress, backend). */
  name: string;
  /** Short namespace name in the lab. */
  ns: string;
  iface: string;
  file: string;
}

/** A running capture. */
export interface RunningCapture {
  point: CapturePoint;
  /** The "listening on ..., link-type ..." line tcpdump printed. */
  listening: string;
  stop(): Promise<CaptureStats>;
}

/** tcpdump's closing counters. */
export interface CaptureStats {
  point: string;
  captured: number | null;
  droppedByKernel: number | null;
  exitCode: number | null;
}

/** Starts tcpdump for `point` and resolves once it is listening. */
export async function startCapture(
  lab: Netns,
  point: CapturePoint,
  snaplen = 512,
): Promise<RunningCapture> {
  // -Z root: Debian's tcpdump may drop to user tcpdump, which cannot write into a root-owned dir.
  const child: ChildProcess = lab.spawn(point.ns, 'tcpdump', [
    '-i',
    point.iface,
    '--immediate-mode',
    '-U',
    '-s',
    String(snaplen),
    '-Z',
    'root',
    '-w',
    point.file,
  ]);
  const stderr = collect(child.stderr);
  child.stdout?.resume();
  const listening = await waitForLine(
    child,
    child.stderr,
    /listening on /,
    `tcpdump on ${lab.full(point.ns)}/${point.iface}`,
  );
  return {
    point,
    listening,
    async stop(): Promise<CaptureStats> {
      const exitCode = await stopChild(child, 'SIGINT');
      const text = stderr();
      const num = (re: RegExp): number | null => {
        const m = re.exec(text);
        return m?.[1] === undefined ? null : Number(m[1]);
      };
      return {
        point: point.name,
        captured: num(/(\d+) packets? captured/),
        droppedByKernel: num(/(\d+) packets? dropped by kernel/),
        exitCode,
      };
    },
  };
}

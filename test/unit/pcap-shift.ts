/**
 * A classic pcap file (what tcpdump -w writes) with every record's timestamp moved by a known
 * amount: one node's clock set wrong on purpose, for the clock-offset tests. The bytes of the
 * frames are not touched. Microsecond and nanosecond files, either byte order.
 */

const MAGIC_US = 0xa1b2c3d4;
const MAGIC_NS = 0xa1b23c4d;

/** `file` with each record's time plus `shiftNs` (a whole number of the file's resolution). */
export function shiftPcapTimes(file: Buffer, shiftNs: bigint): Buffer {
  const out = Buffer.from(file);
  const le = out.readUInt32LE(0);
  const be = out.readUInt32BE(0);
  const little = le === MAGIC_US || le === MAGIC_NS;
  if (!little && be !== MAGIC_US && be !== MAGIC_NS) throw new Error('not a classic pcap file');
  const ns = (little ? le : be) === MAGIC_NS;
  const perSec = ns ? 1_000_000_000n : 1_000_000n;
  const unit = ns ? 1n : 1000n;
  if (shiftNs % unit !== 0n)
    throw new Error(`a ${String(shiftNs)} ns shift is finer than the file`);
  const shift = shiftNs / unit;
  const u32 = (at: number): bigint => BigInt(little ? out.readUInt32LE(at) : out.readUInt32BE(at));
  const put = (at: number, v: bigint): void => {
    if (little) out.writeUInt32LE(Number(v), at);
    else out.writeUInt32BE(Number(v), at);
  };
  for (let at = 24; at + 16 <= out.length;) {
    const t = u32(at) * perSec + u32(at + 4) + shift;
    put(at, t / perSec);
    put(at + 4, t % perSec);
    at += 16 + Number(u32(at + 8));
  }
  return out;
}

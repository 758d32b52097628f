/*
 * Sanitizer fuzz of the C decoder (summary.c), run by test/unit/summary-fuzz.test.ts: seed frames
 * (Ethernet/VLAN/IPv4/IPv6/TCP/UDP/VXLAN/Geneve with a request line and a probe marker) are
 * mutated and cut at random, each copied into an exactly-sized heap buffer, so AddressSanitizer
 * stops at the first byte read past a frame; UndefinedBehaviorSanitizer catches shifts, overflows
 * and misaligned accesses. summary.c parses untrusted packets in a privileged agent: this is the
 * test that it never reads what it was not given. Every FAST record, and random garbage records,
 * also go through summary_wire.c into an exactly-sized buffer of ctx + SUMMARY_WIRE_MAX bytes: the
 * protobuf writer never writes past its bound; retention's headers-only cut (summary_one's
 * headers_end, headers.c for SLOW frames) never falls past the frame. Each frame also goes
 * through the offline gate (gated()): the same decision as the decoder's, and the quiet test's
 * quick path the same as the test on the record (quiet_quick, SUMMARY_GATE_NO_QUICK); and through
 * summary_quick (quick()): what it takes, the decoder takes with the same values. Usage: fuzz
 * [iterations]
 */
#include "summary.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint32_t x = 0x12345678;
static uint32_t rnd(void) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x; }
static size_t build(uint8_t *f, int kind) {
  memset(f, 0, 600);
  size_t o = 0;
  f[12] = 0x08; f[13] = 0x00; o = 14;
  if (kind == 1) { f[12] = 0x81; f[13] = 0; f[16] = 0x08; f[17] = 0; o = 18; }
  if (kind == 2) { f[12] = 0x86; f[13] = 0xdd; f[o] = 0x60; f[o+4] = 0; f[o+5] = 100; f[o+6] = 6; o += 40; f[o+12] = 0x80; return o + 100; }
  int udp = kind == 3 || kind == 4 || kind == 5;
  f[o] = 0x45; f[o+2] = 1; f[o+3] = 0; f[o+9] = udp ? 17 : 6; size_t ip = o; o += 20;
  if (udp) { f[o+2] = kind == 4 ? 0x17 : 0x12; f[o+3] = kind == 4 ? 0xc1 : 0xb5; f[o+4] = 0; f[o+5] = 200; o += 8;
    if (kind == 4) { f[o] = 0x02; f[o+2] = 0x65; f[o+3] = 0x58; o += 16; } else { f[o] = 0x08; o += 8; }
    /* kind 5: the inner IPv4 without options (the gate's classify() shape) */
    f[o+12] = 0x08; o += 14; f[o] = kind == 5 ? 0x45 : 0x46; f[o+3] = 120; f[o+9] = 6; o += kind == 5 ? 20 : 24; }
  f[o+12] = 0x80; f[o+20] = 8; f[o+21] = 10; o += 32;
  memcpy(f + o, "GET /x HTTP/1.1\r\nhoptrace-probe-ab12 ", 37);
  (void)ip;
  return o + 120;
}
/* summary_wire of rec into an exactly-sized heap buffer (a 20-byte context, tables of 256). */
static size_t wire(const uint8_t *rec) {
  static uint8_t tables[512];
  static const uint8_t ctx[20] = {0x0a, 7, 'b', 'a', 'c', 'k', 'e', 'n', 'd', 0x12, 2, 'n', '1',
                                  0x1a, 4, 'e', 't', 'h', '0', 0};
  for (int i = 0; i < 512; i++) tables[i] = (uint8_t)(i % 9 + 1);
  uint8_t *out = malloc(20 + SUMMARY_WIRE_MAX);
  size_t n = summary_wire(rec, ctx, 20, 1, (uint64_t)rnd() << 20, tables, tables + 256, out);
  free(out);
  return n;
}

/*
 * The same frame behind a gate (summary_run_gate over an exactly-sized batch record, so the gate's
 * own look at the headers is fuzzed too): outside a window it gets a record exactly when it is
 * SLOW and is counted exactly when it is a FAST TCP or UDP frame; in pass 1's SYN mode a FAST TCP
 * SYN gets one as well. Returns 1 on a mismatch.
 */
static long quiet_left;
static int gated(const uint8_t *frame, size_t len, uint32_t lt, const uint8_t *ports, int ok,
                 const uint8_t *want) {
  static uint32_t seen[1 << 15];
  uint8_t *src = malloc(16 + len);
  memset(src, 0, 16);
  memcpy(src, &(uint32_t){(uint32_t)len}, 4);
  memcpy(src + 4, &(uint32_t){(uint32_t)len}, 4);
  src[8] = 1; /* ts 1 */
  memcpy(src + 16, frame, len);
  int useful = ok && (want[4] == 0 || want[4] == 1);
  int syn = ok && want[4] == 0 && (want[64] & 0x12) == 0x02;
  uint32_t frame_of[2];
  uint8_t out[192 * 2];
  SummaryGate w = {.flags = SUMMARY_GATE_WINDOW, .lo = 5, .hi = 9, .frame_of = frame_of};
  SummaryGate p1 = {.flags = SUMMARY_GATE_SYN | SUMMARY_GATE_PROTO | SUMMARY_GATE_PORTS |
                             SUMMARY_GATE_SEEN | SUMMARY_GATE_BEST,
                    .proto = 6, .best_ts = 0, .seen = seen, .frame_of = frame_of};
  size_t next;
  int stop, bad = 0;
  size_t n = summary_run_gate(src, 16 + len, 0, 0, lt, 262144, ports, out, 2, &next, &stop, &w, NULL);
  if (n != (size_t)!ok || w.skipped_useful != (uint32_t)useful || w.frames != 1) bad = 1;
  n = summary_run_gate(src, 16 + len, 0, 0, lt, 262144, ports, out, 2, &next, &stop, &p1, NULL);
  if (n != (size_t)(!ok || syn) || p1.skipped_useful != (uint32_t)(useful && !syn)) bad = 1;
  /* The fields every FAST record writes whole (0..87), but for the data offset. */
  if (n == 1 && ok && (memcmp(out, want, 24) != 0 || memcmp(out + 28, want + 28, 60) != 0)) bad = 1;
  /* The quiet test (a later point's gate, its window taking the frame): decided on the frame's
   * bytes first (summary.c quiet_quick) or on its record alone (SUMMARY_GATE_NO_QUICK), the same.
   * Now and then its keys are the frame's own seq, ack and hashes, its bucket hot. */
  static uint32_t hot[SUMMARY_GATE_HOT_BUCKETS];
  uint32_t own[4], keys[6];
  memcpy(own, want + 56, 8);
  memcpy(own + 2, want + 80, 8);
  for (int i = 0; i < 6; i++) keys[i] = rnd() % 4 == 0 && ok ? own[i < 4 ? i : 3] : rnd();
  for (int i = 0; i < 6; i += 2)
    if (keys[i] > keys[i + 1]) {
      uint32_t x = keys[i];
      keys[i] = keys[i + 1];
      keys[i + 1] = x;
    }
  uint32_t bucket = ok ? (want[28] | want[29] << 8) & (SUMMARY_GATE_HOT_BUCKETS - 1) : 0;
  hot[bucket] = rnd() % 4 == 0;
  SummaryGate q = {.flags = SUMMARY_GATE_WINDOW | SUMMARY_GATE_QUIET | SUMMARY_GATE_QUIET_ON,
                   .lo = 0, .hi = ~0ull, .hot = hot, .keys = keys, .n_seq = 2, .n_ack = 2,
                   .n_data = 2, .frame_of = frame_of};
  SummaryGate r = q;
  r.flags |= SUMMARY_GATE_NO_QUICK;
  size_t nq = summary_run_gate(src, 16 + len, 0, 0, lt, 262144, ports, out, 2, &next, &stop, &q, NULL);
  size_t nr = summary_run_gate(src, 16 + len, 0, 0, lt, 262144, ports, out, 2, &next, &stop, &r, NULL);
  if (nq != nr || q.skipped_useful != r.skipped_useful || q.frames != r.frames) bad = 1;
  quiet_left += nq == 0 && ok;
  hot[bucket] = 0;
  free(src);
  if (bad) fprintf(stderr, "gate mismatch: lt %u len %zu ok %d\n", lt, len, ok);
  return bad;
}

/*
 * summary_quick on the same exactly-sized frame: it takes only frames summary_one takes as FAST,
 * with the record's flow hash, protocol, addresses, ports, TCP flags and headers_end, and it
 * sees every probe marker the record has. Returns 1 on a mismatch.
 */
static long quick_taken;
static int quick(const uint8_t *f, size_t len, uint32_t lt, const uint8_t *ports, int ok,
                 const uint8_t *rec, uint32_t hend) {
  SummaryQuick q;
  if (!summary_quick(f, (uint32_t)len, lt, ports, &q)) return 0;
  quick_taken++;
  uint32_t h, src, dst;
  memcpy(&h, rec + 28, 4);
  memcpy(&src, rec + 88, 4);
  memcpy(&dst, rec + 104, 4);
  int bad = !ok || h != q.hash || rec[2] != q.proto || src != q.src || dst != q.dst ||
            (rec[32] | rec[33] << 8) != q.sport || (rec[34] | rec[35] << 8) != q.dport ||
            (q.proto == 6 && rec[64] != q.tcp_flags) || hend != q.headers_end ||
            ((rec[1] & 128) && !q.marker) || (rec[1] & 1) || rec[7] != 0;
  if (bad) fprintf(stderr, "quick mismatch: lt %u len %zu ok %d\n", lt, len, ok);
  return bad;
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? atol(argv[1]) : 1000000;
  uint8_t ports[65536] = {0}; ports[4789] = 1; ports[8472] = 1; ports[6081] = 2; ports[51820] = 3;
  uint8_t rec[192], seed[600];
  long fast = 0;
  for (long it = 0; it < iterations; it++) {
    size_t n = build(seed, (int)(rnd() % 6));
    int flips = rnd() % 6;
    for (int k = 0; k < flips; k++) seed[rnd() % n] = (uint8_t)rnd();
    size_t len = rnd() % 3 == 0 ? rnd() % (n + 1) : n;
    uint8_t *f = malloc(len ? len : 1);
    memcpy(f, seed, len);
    uint32_t lt = (uint32_t[]){1, 1, 1, 113, 276, 101, 0, 108}[rnd() % 8];
    uint32_t hend = 0;
    int ok = summary_one(f, (uint32_t)len, (uint32_t)len, 1, lt, ports, rec, 0, &hend);
    if (hend > len) __builtin_trap();
    fast += ok;
    if (quick(f, len, lt, ports, ok, rec, hend)) return 1;
    free(f);
    if (ok && wire(rec) > 20 + SUMMARY_WIRE_MAX) return 1;
    if (gated(seed, len, lt, ports, ok, rec)) return 1;
  }
  /* Garbage records (any bytes, marked FAST): the writer stays within its bound. */
  for (long it = 0; it < iterations / 10; it++) {
    for (int i = 0; i < 192; i++) rec[i] = (uint8_t)rnd();
    rec[0] = 1;
    if (wire(rec) > 20 + SUMMARY_WIRE_MAX) return 1;
  }
  /* summary_run over a buffer of random bytes in every layout: framing never reads past src_len. */
  for (long it = 0; it < iterations / 10; it++) {
    size_t len = rnd() % 400;
    uint8_t *src = malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++) src[i] = (uint8_t)rnd();
    uint8_t out[192 * 4]; size_t next; int stop;
    summary_run(src, len, 0, (int)(rnd() % 5), 1, 262144, ports, out, 4, &next, &stop);
    free(src);
  }
  printf("ok: %ld frames, %ld took the fast path, %ld summary_quick, %ld left out quiet\n",
         iterations, fast, quick_taken, quiet_left);
  return 0;
}

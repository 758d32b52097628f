/*
 * summary_wire.c — a FAST summary record (summary.c) straight to protobuf: one entry of
 * EventBatch's repeated `events` field (proto/hoptrace.proto), byte for byte what
 * common/events-wire.ts writeEvent writes for the PacketEvent core/decode/summary.ts
 * summaryEvent builds from the record (test/unit/summary-parity.test.ts compares them on every
 * corpus frame). The agent process calls it through the addon (wireRun) so that a busy backend's
 * events go from capture to WebSocket without a JavaScript object or a byte-by-byte JS loop each.
 *
 *   entry := 0x1a len3 PacketEvent          len3: a 3-byte varint, padded as Out.end writes it
 *   PacketEvent := ctx (fields 1-3, given) | 4 linktype | 5 fixed64 ts | 6 frame | 7 outer tuple |
 *                  8 inner tuple | 10 tunnels | 11 keys | 14 wire length
 *   tuple := 1 transport | 2 ip proto | 3 src text | 4 dst text | 5 sport | 6 dport
 *   keys  := 1 ip id | 2 seq | 3 ack | 4 flags | 5 window | 6 tsval | 7 tsecr | 8 payload length |
 *            9 payload hash | 10 request-line hash | 11 probe marker
 */
#include <string.h>

#include "summary.h"

/* Record offsets and flags: summary.c's layout comment. */
#define SF_OUTER 1
#define SF_INNER_V6 2
#define SF_OUTER_V6 4
#define SF_TCP 8
#define SF_TSOPT 16
#define SF_PAYLOAD 32
#define SF_IPID 64
#define SF_MARKER 128
#define PF_HASHES 4

static inline uint32_t u32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint8_t *varint(uint8_t *o, uint64_t v) {
  while (v >= 0x80) {
    *o++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *o++ = (uint8_t)v;
  return o;
}

static inline uint8_t *field(uint8_t *o, int no, uint64_t v) {
  *o++ = (uint8_t)(no << 3);
  return varint(o, v);
}

static inline void len3(uint8_t *mark, const uint8_t *end) {
  uint32_t len = (uint32_t)(end - mark - 3);
  mark[0] = (uint8_t)((len & 0x7f) | 0x80);
  mark[1] = (uint8_t)(((len >> 7) & 0x7f) | 0x80);
  mark[2] = (uint8_t)(len >> 14);
}

/* Decimal text of each byte value: its digits, then '.' (4 bytes), and the digit count. Built
 * once when the addon (or the fuzz harness) loads. */
static char dec_text[256][4];
static uint8_t dec_len[256];
__attribute__((constructor)) static void dec_init(void) {
  for (unsigned v = 0; v < 256; v++) {
    char t[4] = {0};
    int n = 0;
    if (v >= 100) t[n++] = (char)('0' + v / 100);
    if (v >= 10) t[n++] = (char)('0' + (v / 10) % 10);
    t[n++] = (char)('0' + v % 10);
    t[n] = '.';
    memcpy(dec_text[v], t, 4);
    dec_len[v] = (uint8_t)n;
  }
}

/* Dotted quad, as core/decode/address.ts formatIPv4: four 4-byte stores of "ddd." (the last
 * octet's '.' and any byte past it are overwritten by whatever comes next: callers leave room, at
 * most 3 bytes past the text). This showed as ~8 % of the agent process with a digit loop. */
static char *fmt_v4(const uint8_t *a, char *s) {
  for (int k = 0; k < 3; k++) {
    memcpy(s, dec_text[a[k]], 4);
    s += dec_len[a[k]] + 1;
  }
  memcpy(s, dec_text[a[3]], 4);
  return s + dec_len[a[3]];
}

/* RFC 5952 text, as core/decode/address.ts formatIPv6 (same run choice, same ::ffff: rule). */
static char *fmt_v6(const uint8_t *a, char *s) {
  int best = -1, best_len = 0, run = -1;
  for (int i = 0; i < 8; i++) {
    unsigned g = ((unsigned)a[2 * i] << 8) | a[2 * i + 1];
    if (g == 0) {
      if (run < 0) run = i;
      if (i - run + 1 > best_len) {
        best_len = i - run + 1;
        best = run;
      }
    } else {
      run = -1;
    }
  }
  if (best == 0 && best_len == 5 && a[10] == 0xff && a[11] == 0xff) {
    memcpy(s, "::ffff:", 7);
    return fmt_v4(a + 12, s + 7);
  }
  if (best_len < 2) best = -1;
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 8; i++) {
    if (i == best) {
      if (i == 0) *s++ = ':';
      *s++ = ':';
      i += best_len - 1;
      continue;
    }
    unsigned g = ((unsigned)a[2 * i] << 8) | a[2 * i + 1];
    int started = 0;
    for (int sh = 12; sh >= 0; sh -= 4) {
      unsigned d = (g >> sh) & 15;
      if (d || started || sh == 0) {
        *s++ = hex[d];
        started = 1;
      }
    }
    if (i < 7) *s++ = ':';
  }
  return s;
}

static uint8_t *text(uint8_t *o, int no, const uint8_t *addr, int v6) {
  *o++ = (uint8_t)((no << 3) | 2);
  char *start = (char *)o + 1;
  char *end = v6 ? fmt_v6(addr, start) : fmt_v4(addr, start);
  *o = (uint8_t)(end - start); /* ≤ 45 */
  return (uint8_t *)end;
}

static uint8_t *tuple(uint8_t *o, int no, const uint8_t *rec, int v6, int ports, int proto_at,
                      int transport_at, int src_at, int dst_at, int sport_at,
                      const uint8_t *transport_wire) {
  *o = (uint8_t)((no << 3) | 2);
  uint8_t *m = o + 1;
  o += 4;
  o = field(o, 1, transport_wire[rec[transport_at]]);
  if (rec[proto_at] != 0) o = field(o, 2, rec[proto_at]);
  o = text(o, 3, rec + src_at, v6);
  o = text(o, 4, rec + dst_at, v6);
  if (ports) {
    o = field(o, 5, (uint32_t)rec[sport_at] | ((uint32_t)rec[sport_at + 1] << 8));
    o = field(o, 6, (uint32_t)rec[sport_at + 2] | ((uint32_t)rec[sport_at + 3] << 8));
  }
  len3(m, o);
  return o;
}

size_t summary_wire(const uint8_t *rec, const uint8_t *ctx, size_t ctx_len,
                    uint32_t linktype_value, uint64_t frame, const uint8_t *transport_wire,
                    const uint8_t *tunnel_wire, uint8_t *out) {
  uint8_t *o = out;
  *o = (3 << 3) | 2;
  uint8_t *m = o + 1;
  o += 4;
  memcpy(o, ctx, ctx_len);
  o += ctx_len;
  o = field(o, 4, linktype_value);
  *o++ = (5 << 3) | 1;
  memcpy(o, rec + 16, 8); /* ts, little-endian in the record as on the wire */
  o += 8;
  if (frame != 0) o = field(o, 6, frame);
  uint8_t fl = rec[1], pf = rec[6];
  if (fl & SF_OUTER)
    o = tuple(o, 7, rec, (fl & SF_OUTER_V6) != 0, (pf & 2) != 0, 3, 5, 120, 136, 36, transport_wire);
  o = tuple(o, 8, rec, (fl & SF_INNER_V6) != 0, (pf & 1) != 0, 2, 4, 88, 104, 32, transport_wire);
  /* A record has room for two tunnels; never trust the count beyond that (SUMMARY_WIRE_MAX). */
  int nt = rec[7] <= 2 ? rec[7] : 2;
  for (int k = 0; k < nt; k++) {
    *o = (10 << 3) | 2;
    uint8_t *tm = o + 1;
    o += 4;
    o = field(o, 1, tunnel_wire[rec[40 + 2 * k]]);
    if (rec[40 + 2 * k + 1] == 1) o = field(o, 2, u32(rec + 44 + 4 * k));
    len3(tm, o);
  }
  *o = (11 << 3) | 2;
  uint8_t *km = o + 1;
  o += 4;
  if (fl & SF_IPID) o = field(o, 1, u32(rec + 52));
  if (fl & SF_TCP) {
    o = field(o, 2, u32(rec + 56));
    o = field(o, 3, u32(rec + 60));
    o = field(o, 4, rec[64]);
    o = field(o, 5, (uint32_t)rec[66] | ((uint32_t)rec[67] << 8));
  }
  if (fl & SF_TSOPT) {
    o = field(o, 6, u32(rec + 68));
    o = field(o, 7, u32(rec + 72));
  }
  if (fl & SF_PAYLOAD) {
    uint32_t len = u32(rec + 76);
    if (len != 0) o = field(o, 8, len);
    if (pf & PF_HASHES) {
      o = field(o, 9, u32(rec + 80));
      o = field(o, 10, u32(rec + 84));
      if (fl & SF_MARKER) {
        uint8_t n = rec[65] <= 32 ? rec[65] : 32;
        *o++ = (11 << 3) | 2;
        *o++ = n;
        memcpy(o, rec + 152, n);
        o += n;
      }
    }
  }
  len3(km, o);
  uint32_t wire = u32(rec + 12);
  if (wire != 0) o = field(o, 14, wire);
  len3(m, o);
  return (size_t)(o - out);
}

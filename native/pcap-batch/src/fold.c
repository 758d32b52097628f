/*
 * fold.c — per-flow counters (issue 20): the live capture sends a flow's packets as events only
 * where they can matter to a verdict, and counts the rest.
 *
 * What the collector proves from a point's events is the request's journey: its first packets
 * (SYN, request line, probe marker, first data), its replies, its end (FIN/RST), ICMP errors,
 * and the keys (IP id, seq, payload hash) that recognise one packet at two capture points. None
 * of that needs the 30,000th packet of a bulk flow as an event of its own. So, per flow (the
 * summary record's inner and outer tuples and tunnel ids, either direction) in a bounded table:
 *
 *   sent whole:  every SLOW record (ICMP, DNS, fragments, anything the C decoder leaves to the
 *                reference: never folded, never in the table);
 *                the first `first` packets of each direction after the flow appears;
 *                the first `first` packets of each direction again after a packet that may start
 *                or end an exchange — a TCP SYN, FIN or RST, a probe marker, a payload beginning
 *                like a request (an HTTP method and a space, a TLS ClientHello) — or after the
 *                flow was quiet for reopen_ns (the next request on a kept-alive connection);
 *                every packet of a flow that finds no free slot (full_sent: a scan-like load where
 *                every packet is a new flow degrades to per-packet events, bounded by the
 *                capture's queues as before, never to silence);
 *   counted:     the rest, into the direction's counter: packets, wire bytes, first and last
 *                time and frame. The capture writes the pending counters as counter records
 *                (FOLD_STATUS) with each batch it sends, so a flow's counters follow its events
 *                within the coalescing delay (100 ms) and are never lost at the end of a capture
 *                (the drain flushes them).
 *
 * Pure: no clock (a flow's time is its packets' timestamps), no I/O. The capture callback and the
 * addon's Folder (tests) call the same functions.
 */
#include "fold.h"

#include <stdlib.h>
#include <string.h>

/* summary.c record flags and offsets (its layout comment). */
#define SF_OUTER 1
#define SF_INNER_V6 2
#define SF_OUTER_V6 4
#define SF_TCP 8
#define SF_MARKER 128
#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04

static inline uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void wrf64(uint8_t *p, double v) { memcpy(p, &v, 8); }

int fold_open(FoldTable *t, uint32_t slots, uint32_t first) {
  memset(t, 0, sizeof *t);
  if (first == 0) return 0;
  if (slots < 16 || slots > (1u << 20) || (slots & (slots - 1)) != 0) slots = FOLD_DEFAULT_SLOTS;
  t->slots = calloc(slots, sizeof(FoldFlow));
  if (t->slots == NULL) return -1;
  t->mask = slots - 1;
  t->first = first;
  t->reopen_ns = FOLD_REOPEN_NS;
  t->expire_ns = FOLD_EXPIRE_NS;
  return 0;
}

void fold_close(FoldTable *t) {
  free(t->slots);
  t->slots = NULL;
  t->pending = 0;
  t->held = 0;
}

/* One endpoint: address (16 bytes, zero past the family's length) and port. */
static void endpoint(uint8_t *o, const uint8_t *addr, int v6, const uint8_t *port) {
  memset(o, 0, 16);
  memcpy(o, addr, v6 ? 16 : 4);
  memcpy(o + 16, port, 2);
}

/* A total order on 18-byte endpoints (any consistent one does: word compares, not memcmp). */
static inline int after(const uint8_t *a, const uint8_t *b) {
  uint64_t a0, a1, b0, b1;
  uint16_t a2, b2;
  memcpy(&a0, a, 8);
  memcpy(&b0, b, 8);
  if (a0 != b0) return a0 > b0;
  memcpy(&a1, a + 8, 8);
  memcpy(&b1, b + 8, 8);
  if (a1 != b1) return a1 > b1;
  memcpy(&a2, a + 16, 2);
  memcpy(&b2, b + 16, 2);
  return a2 > b2;
}

/* Whether two keys are equal: twelve word compares, inlined (memcmp was 14 % of the worker). */
static inline int key_eq(const uint8_t *a, const uint8_t *b) {
  uint64_t d = 0;
  for (int i = 0; i < FOLD_KEY; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    d |= x ^ y;
  }
  return d == 0;
}

/* The flow's identity with its endpoints in a fixed order; returns the direction (0: the record's
 * source is the key's first endpoint). Both directions of a flow give the same key: the inner
 * endpoints decide the order, the outer addresses follow it. A flow between one address and port
 * and itself (src = dst) is one direction. */
static int key_of(const uint8_t *rec, uint8_t *key) {
  uint8_t fl = rec[1];
  uint8_t in_a[18], in_b[18], out_a[18], out_b[18];
  endpoint(in_a, rec + 88, fl & SF_INNER_V6, rec + 32);
  endpoint(in_b, rec + 104, fl & SF_INNER_V6, rec + 34);
  if (fl & SF_OUTER) {
    /* Addresses only: a tunnel's outer source port is its own per direction (VXLAN and Geneve
     * derive it from a hash of the inner flow), so the outer ports would split a flow in two. */
    static const uint8_t no_port[2] = {0, 0};
    endpoint(out_a, rec + 120, fl & SF_OUTER_V6, no_port);
    endpoint(out_b, rec + 136, fl & SF_OUTER_V6, no_port);
  } else {
    memset(out_a, 0, 18);
    memset(out_b, 0, 18);
  }
  int dir = after(in_a, in_b);
  memset(key, 0, FOLD_KEY);
  key[0] = fl & (SF_OUTER | SF_INNER_V6 | SF_OUTER_V6);
  memcpy(key + 1, rec + 2, 4); /* inner, outer IP protocol and transport index */
  key[5] = rec[6] & 1;         /* the inner tuple has ports */
  key[6] = rec[7];             /* tunnel count */
  memcpy(key + 8, rec + 40, 12);
  memcpy(key + 20, dir ? in_b : in_a, 18);
  memcpy(key + 38, dir ? in_a : in_b, 18);
  memcpy(key + 56, dir ? out_b : out_a, 18);
  memcpy(key + 74, dir ? out_a : out_b, 18);
  return dir;
}

/* A payload that begins like a request: 3..7 upper-case letters and a space (an HTTP/1 method,
 * HTTP/2's "PRI * HTTP/2.0" preface), or a TLS handshake record holding a ClientHello. */
static int request_like(const uint8_t *b, uint32_t caplen, uint32_t off) {
  if (off >= caplen) return 0;
  const uint8_t *p = b + off;
  uint32_t n = caplen - off;
  if (n >= 6 && p[0] == 0x16 && p[1] == 0x03 && p[5] == 0x01) return 1;
  uint32_t i = 0;
  while (i < n && i < 8 && p[i] >= 'A' && p[i] <= 'Z') i++;
  return i >= 3 && i <= 7 && i < n && p[i] == ' ';
}

static int starts_exchange(const uint8_t *rec, const uint8_t *b, uint32_t caplen, uint32_t off) {
  uint8_t fl = rec[1];
  if ((fl & SF_TCP) && (rec[64] & (TCP_SYN | TCP_FIN | TCP_RST))) return 1;
  if (fl & SF_MARKER) return 1;
  return request_like(b, caplen, off);
}

static void reopen(FoldFlow *f, uint32_t first) {
  f->dir[0].budget = first;
  f->dir[1].budget = first;
}

/* Marks a flow whose key has fold_quick's shape — no outer header, IPv4, TCP or UDP with ports,
 * no tunnel — with its endpoints in the key's order (addresses as the frame holds them). */
static void set_quick(FoldFlow *f) {
  const uint8_t *k = f->key;
  f->quick = k[0] == 0 && (k[1] == 6 || k[1] == 17) && k[5] == 1 && k[6] == 0;
  if (!f->quick) return;
  f->qproto = k[1];
  memcpy(&f->qa, k + 20, 4);
  f->qpa = (uint16_t)(k[36] | (k[37] << 8));
  memcpy(&f->qb, k + 38, 4);
  f->qpb = (uint16_t)(k[54] | (k[55] << 8));
}

int fold_quick(FoldTable *t, const uint8_t *b, uint32_t caplen, uint32_t wirelen, uint64_t ts,
               double frame, const SummaryQuick *q) {
  if (t->slots == NULL) return 0;
  FoldFlow *found = NULL;
  int d = 0;
  /* The slots fold_packet probes, in its order: a key is in one slot at most, and a flow of this
   * shape is found by its endpoints exactly when fold_packet would find it by its key. */
  for (uint32_t k = 0; k < FOLD_PROBES; k++) {
    FoldFlow *f = &t->slots[(q->hash + k) & t->mask];
    if (!f->used || !f->quick || f->hash != q->hash || f->qproto != q->proto) continue;
    if (f->qa == q->src && f->qpa == q->sport && f->qb == q->dst && f->qpb == q->dport) {
      found = f;
      break;
    }
    if (f->qb == q->src && f->qpb == q->sport && f->qa == q->dst && f->qpa == q->dport) {
      found = f;
      d = 1;
      break;
    }
  }
  if (found == NULL) return 0;
  if (ts > found->last_ts && ts - found->last_ts >= t->reopen_ns) return 0;
  if (q->proto == 6 && (q->tcp_flags & (TCP_SYN | TCP_FIN | TCP_RST))) return 0;
  if (q->marker || request_like(b, caplen, q->headers_end)) return 0;
  FoldDir *dir = &found->dir[d];
  if (dir->budget > 0 || dir->packets == 0) return 0;
  if (ts > found->last_ts) found->last_ts = ts;
  dir->packets += 1;
  dir->bytes += wirelen;
  if (ts > dir->last_ts) dir->last_ts = ts;
  dir->last_frame = frame;
  t->folded += 1;
  t->held += 1;
  t->quick += 1;
  return 1;
}

int fold_packet(FoldTable *t, const uint8_t *rec, const uint8_t *b, uint32_t caplen,
                uint32_t payload_off, double frame) {
  if (t->slots == NULL || rec[0] != 1) return 1;
  uint8_t key[FOLD_KEY];
  int d = key_of(rec, key);
  uint32_t hash = rd32(rec + 28);
  uint64_t ts = rd64(rec + 16);
  FoldFlow *found = NULL, *spare = NULL;
  for (uint32_t k = 0; k < FOLD_PROBES; k++) {
    FoldFlow *f = &t->slots[(hash + k) & t->mask];
    if (!f->used) {
      if (spare == NULL) spare = f;
      continue;
    }
    if (f->hash == hash && key_eq(f->key, key)) {
      found = f;
      break;
    }
    /* Idle long enough and holding no counts: its slot may be taken. */
    if (spare == NULL && f->dir[0].packets == 0 && f->dir[1].packets == 0 && ts > f->last_ts &&
        ts - f->last_ts >= t->expire_ns)
      spare = f;
  }
  if (found == NULL) {
    if (spare == NULL) {
      t->full_sent += 1;
      return 1;
    }
    if (!spare->used) t->flows += 1;
    memset(spare, 0, sizeof *spare);
    spare->used = 1;
    spare->hash = hash;
    memcpy(spare->key, key, FOLD_KEY);
    set_quick(spare);
    reopen(spare, t->first);
    found = spare;
  } else if (ts > found->last_ts && ts - found->last_ts >= t->reopen_ns) {
    reopen(found, t->first);
  }
  if (ts > found->last_ts) found->last_ts = ts;
  if (starts_exchange(rec, b, caplen, payload_off)) {
    reopen(found, t->first);
    return 1;
  }
  FoldDir *dir = &found->dir[d];
  if (dir->budget > 0) {
    dir->budget--;
    return 1;
  }
  if (dir->packets == 0) {
    memcpy(dir->rec, rec, SUMMARY_BYTES);
    dir->first_frame = frame;
    dir->bytes = 0;
    t->pending += 1;
  }
  dir->packets += 1;
  dir->bytes += rd32(rec + 12);
  if (ts > dir->last_ts) dir->last_ts = ts; /* TPACKET_V3 on `any` may interleave times */
  dir->last_frame = frame;
  t->folded += 1;
  t->held += 1;
  return 0;
}

/* The counter record of one direction (see fold.h). */
static void counter_record(const FoldDir *dir, uint8_t *o) {
  memcpy(o, dir->rec, SUMMARY_BYTES);
  o[0] = FOLD_STATUS;
  o[1] &= SF_OUTER | SF_INNER_V6 | SF_OUTER_V6;
  o[6] &= 3;
  memset(o + 52, 0, 36);
  memset(o + 152, 0, 40);
  wr64(o + FOLD_R_PACKETS, (uint64_t)dir->packets);
  wr64(o + FOLD_R_BYTES, (uint64_t)dir->bytes);
  wr64(o + FOLD_R_LAST_TS, dir->last_ts);
  wrf64(o + FOLD_R_FIRST_FRAME, dir->first_frame);
  wrf64(o + FOLD_R_LAST_FRAME, dir->last_frame);
}

size_t fold_flush(FoldTable *t, uint8_t *out, size_t max) {
  size_t n = 0;
  if (t->slots == NULL) return 0;
  uint32_t slots = t->mask + 1;
  for (uint32_t seen = 0; seen < slots && t->pending > 0 && n < max; seen++) {
    FoldFlow *f = &t->slots[t->cursor];
    if (f->used) {
      for (int d = 0; d < 2 && n < max; d++) {
        FoldDir *dir = &f->dir[d];
        if (dir->packets == 0) continue;
        counter_record(dir, out + n * SUMMARY_BYTES);
        n++;
        t->held -= dir->packets;
        dir->packets = 0;
        t->pending -= 1;
      }
      if (n >= max && (f->dir[0].packets > 0 || f->dir[1].packets > 0)) break;
    }
    t->cursor = (t->cursor + 1) & t->mask;
  }
  return n;
}

double fold_batch_packets(const uint8_t *recs, size_t n) {
  double p = 0;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *r = recs + i * SUMMARY_BYTES;
    p += r[0] == FOLD_STATUS ? (double)rd64(r + FOLD_R_PACKETS) : 1;
  }
  return p;
}

/*
 * summary.c — the decoder's fast path in C: frames → fixed 192-byte summary records.
 *
 * core/decode (TypeScript) is the reference decoder: every link type, tunnel and malformation.
 * This file decodes only the shapes that make up nearly all traffic, and decodes them exactly as
 * the reference does (test/unit/summary-parity.test.ts compares both on every frame of the shared
 * corpus, the lab captures and mutated frames):
 *
 *   link:      Ethernet (+ VLAN 8100/88a8/9100/9200 stacks), Linux SLL/SLL2, RAW, NULL/LOOP
 *   network:   IPv4 (any options, first fragments), IPv6 without extension headers
 *   transport: TCP (timestamp option), UDP, any protocol the reference leaves as a leaf
 *   tunnels:   UDP port → VXLAN / Geneve (the caller's port table), IPIP / 6in4 / 4in6 / 6in6;
 *              at most two IP layers
 *
 * Anything else — a header cut short by the snaplen, a malformed field, ICMP (its quoted tuple),
 * IPv6 extension headers, GRE, MPLS, WireGuard, a non-first fragment, TSO lengths of 0 — is marked
 * SLOW and the caller decodes that frame with the reference decoder. So the fast path is never
 * wrong, only sometimes not taken: a SLOW record costs what it cost before.
 *
 * Record (little-endian, 192 bytes, SUMMARY_BYTES):
 *   0  u8  status (1 fast, 0 slow)       1  u8  flags (SF_*)
 *   2  u8  inner IP protocol             3  u8  outer IP protocol
 *   4  u8  inner transport index         5  u8  outer transport index (common/event.ts order)
 *   6  u8  port flags (1 inner ports, 2 outer ports, 4 payload and request-line hashes present)
 *   7  u8  tunnel count (0..2)
 *   8  u32 caplen   12 u32 wire length   16 u64 ts (ns)   24 u32 offset of the frame's bytes in src
 *   28 u32 direction-free flow hash of the inner tuple (addresses, ports, protocol)
 *   32 u16 inner sport  34 u16 inner dport  36 u16 outer sport  38 u16 outer dport
 *   40 u8 tunnel 0 kind  41 u8 tunnel 0 has id  42 u8 tunnel 1 kind  43 u8 tunnel 1 has id
 *   44 u32 tunnel 0 id   48 u32 tunnel 1 id
 *   52 u32 IPv4 id  56 u32 seq  60 u32 ack  64 u8 TCP flags  65 u8 marker length  66 u16 window
 *   68 u32 tsVal  72 u32 tsEcr  76 u32 payload length  80 u32 payload hash  84 u32 request-line hash
 *   88 inner src (16)  104 inner dst (16)  120 outer src (16)  136 outer dst (16)  (IPv4: first 4)
 *   152 probe marker id (32, marker length bytes)   184 u32 FNV-1a of the marker id
 *   188 reserved (zero); pcapng (summary_run_ng): u32 interface id
 * A FAST IPv4 record without tunnel or marker is read from its first two cache lines only (the
 * hashes flag lived in byte 188 once, and cost the agent a third line per record).
 */
#include "summary.h"

#include "headers.h"

#include <string.h>

#define SF_OUTER 1
#define SF_INNER_V6 2
#define SF_OUTER_V6 4
#define SF_TCP 8
#define SF_TSOPT 16
#define SF_PAYLOAD 32 /* payload length present (> 0) */
#define SF_IPID 64
#define SF_MARKER 128
#define PF_HASHES 4 /* port flags: payload and request-line hashes present (some payload captured) */

/* common/event.ts TRANSPORT_NAMES and TUNNEL_KINDS indexes. */
enum { TR_TCP = 0, TR_UDP, TR_ICMP, TR_ICMPV6, TR_SCTP, TR_GRE, TR_ESP, TR_OTHER };
enum { TK_VXLAN = 0, TK_GENEVE = 2, TK_IPIP = 5, TK_6IN4 = 6, TK_4IN6 = 7, TK_6IN6 = 8 };

#define FNV_OFFSET 0x811c9dc5u
#define FNV_PRIME 0x01000193u

static uint32_t fnv(const uint8_t *b, uint32_t from, uint32_t to) {
  uint32_t h = FNV_OFFSET;
  for (uint32_t i = from; i < to; i++) {
    h ^= b[i];
    h *= FNV_PRIME;
  }
  return h;
}

/* xxHash32, seed 0 (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md): the payload
 * fingerprint of core/decode/keys.ts. Lanes are read little-endian, as the spec says. */
#define XP1 0x9E3779B1u
#define XP2 0x85EBCA77u
#define XP3 0xC2B2AE3Du
#define XP4 0x27D4EB2Fu
#define XP5 0x165667B1u
static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
static inline uint32_t rdle32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint32_t xxh32(const uint8_t *b, uint32_t from, uint32_t to) {
  const uint8_t *p = b + from, *end = b + to;
  uint32_t len = to - from, h;
  if (len >= 16) {
    uint32_t v1 = XP1 + XP2, v2 = XP2, v3 = 0, v4 = 0u - XP1;
    const uint8_t *limit = end - 16;
    do {
      v1 = rotl32(v1 + rdle32(p) * XP2, 13) * XP1;
      v2 = rotl32(v2 + rdle32(p + 4) * XP2, 13) * XP1;
      v3 = rotl32(v3 + rdle32(p + 8) * XP2, 13) * XP1;
      v4 = rotl32(v4 + rdle32(p + 12) * XP2, 13) * XP1;
      p += 16;
    } while (p <= limit);
    h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18);
  } else {
    h = XP5;
  }
  h += len;
  while (p + 4 <= end) {
    h = rotl32(h + rdle32(p) * XP3, 17) * XP4;
    p += 4;
  }
  while (p < end) {
    h = rotl32(h + (uint32_t)(*p) * XP5, 11) * XP1;
    p++;
  }
  h ^= h >> 15;
  h *= XP2;
  h ^= h >> 13;
  h *= XP3;
  h ^= h >> 16;
  return h;
}

/* First CR or LF in b[from, end), else end: eight bytes per step (a zero-byte test on b ^ CR and
 * b ^ LF), then byte by byte within the word that has one. */
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
static uint32_t line_end(const uint8_t *b, uint32_t from, uint32_t end) {
  uint32_t i = from;
  for (; i + 8 <= end; i += 8) {
    uint64_t v;
    memcpy(&v, b + i, 8);
    uint64_t x = v ^ (0x0dull * ONES), y = v ^ (0x0aull * ONES);
    if (((x - ONES) & ~x & HIGHS) | ((y - ONES) & ~y & HIGHS)) break;
  }
  for (; i < end; i++)
    if (b[i] == 0x0d || b[i] == 0x0a) return i;
  return end;
}

static const char MARK[] = "hoptrace-probe-";
#define MARK_LEN 15u
/* Horspool shifts for MARK, by the byte under the window's last position. */
static const uint8_t mark_shift[256] = {
    [0 ... 255] = MARK_LEN,
    /* MARK_LEN - 1 - (rightmost index of the byte in MARK[0 .. MARK_LEN - 2]) */
    ['h'] = 14, ['t'] = 11, ['a'] = 9, ['c'] = 8, ['-'] = 6, ['p'] = 5, ['r'] = 4, ['o'] = 3,
    ['b'] = 2, ['e'] = 1,
};

/* Where the first "hoptrace-probe-" starts in b[from, to) as the marker search walks it, else
 * UINT32_MAX. Boyer-Moore-Horspool: most payload bytes are not in the marker, so the window moves
 * 15 bytes at a time; occurrences come in order, as the reference's byte loop finds them. */
static inline uint32_t mark_from(const uint8_t *b, uint32_t from, uint32_t to) {
  if (to <= from + MARK_LEN) return UINT32_MAX;
  uint32_t last = to - MARK_LEN;
  for (uint32_t i = from; i < last; i += mark_shift[b[i + MARK_LEN - 1]])
    if (b[i + MARK_LEN - 1] == '-' && memcmp(b + i, MARK, MARK_LEN - 1) == 0) return i;
  return UINT32_MAX;
}

static inline uint32_t rd_le32_at(const uint8_t *p) { return rdle32(p); }
static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline void le16(uint8_t *o, uint32_t v) {
  o[0] = (uint8_t)v;
  o[1] = (uint8_t)(v >> 8);
}
static inline void le32(uint8_t *o, uint32_t v) {
  o[0] = (uint8_t)v;
  o[1] = (uint8_t)(v >> 8);
  o[2] = (uint8_t)(v >> 16);
  o[3] = (uint8_t)(v >> 24);
}

static int transport_index(int p) {
  switch (p) {
    case 6: return TR_TCP;
    case 17: return TR_UDP;
    case 1: return TR_ICMP;
    case 58: return TR_ICMPV6;
    case 132: return TR_SCTP;
    case 47: return TR_GRE;
    case 50: return TR_ESP;
    default: return TR_OTHER;
  }
}

typedef struct {
  int v6;
  int proto;
  int has_ports;
  uint16_t sport, dport;
  const uint8_t *src, *dst;
} IpTuple;

typedef struct {
  const uint8_t *b;
  uint32_t caplen;
  uint32_t len; /* readable window, narrowed to each IP datagram */
  const uint8_t *ports;
  IpTuple ip[2];
  int nip;
  int pending; /* index of the tuple the next transport header fills, -1 none */
  int ntun;
  uint8_t tun_kind[2], tun_has_id[2];
  uint32_t tun_id[2];
  int32_t ip_id;
  int tcp;
  uint32_t seq, ack, tsval, tsecr;
  int tsopt;
  uint8_t flags;
  uint16_t window;
  int64_t pay_off, pay_end;
  uint32_t ip_wire_end;
  int cur_v6;
  /* Where a SLOW frame's headers end, for retention's headers-only cut (summary_one's
   * headers_end; headers.c). tail_at: the IP payload the fast path stopped at (tail_proto its
   * protocol), -1 if it stopped elsewhere; stop_off: where the header it could not read starts
   * when no IP payload was reached, -1 when the frame carries no IP (ARP, LLDP: kept whole). */
  int64_t tail_at;
  int tail_proto;
  int64_t stop_off;
} St;

#define NEED(at, n) ((uint64_t)(at) + (uint64_t)(n) <= (uint64_t)s->len)

enum { NX_SLOW = -1, NX_DONE = 0, NX_ETH, NX_ETHERTYPE, NX_V4, NX_V6 };

/* EtherType → next; 'ethertype' is in s->... passed by value. VLAN tags are walked in place. */
static int ethertype_next(St *s, uint32_t *off, uint16_t type, int allow_vlan) {
  int tags = 0;
  for (;;) {
    if (type == 0x0800) return NX_V4;
    if (type == 0x86dd) return NX_V6;
    if (type == 0x6558) return NX_ETH;
    s->stop_off = *off;
    if (allow_vlan && (type == 0x8100 || type == 0x88a8 || type == 0x9100 || type == 0x9200)) {
      if (++tags > 8 || !NEED(*off, 4)) return NX_SLOW;
      type = be16(s->b + *off + 2);
      *off += 4;
      s->stop_off = *off;
      if (type <= 1500) return NX_SLOW; /* LLC */
      continue;
    }
    if (!headers_carry_ip(type)) s->stop_off = -1;
    return NX_SLOW;
  }
}

static int begin_ip(St *s, int v6, const uint8_t *src, const uint8_t *dst, int proto) {
  if (s->nip == 2) return 0;
  IpTuple *t = &s->ip[s->nip];
  t->v6 = v6;
  t->proto = proto;
  t->has_ports = 0;
  t->src = src;
  t->dst = dst;
  s->pending = s->nip;
  s->nip++;
  s->ip_id = -1;
  s->tcp = 0;
  s->tsopt = 0;
  s->pay_off = -1;
  s->pay_end = -1;
  return 1;
}

static void tcp_options(St *s, uint32_t from, uint32_t to) {
  const uint8_t *b = s->b;
  uint32_t o = from;
  while (o < to) {
    uint8_t kind = b[o];
    if (kind == 0) return;
    if (kind == 1) {
      o++;
      continue;
    }
    /* The reference reads b[o + 1] even past the header (undefined → 0 → stop). */
    uint32_t len = o + 1 < s->caplen ? b[o + 1] : 0;
    if (len < 2 || o + len > to) return;
    if (kind == 8 && len == 10) {
      s->tsval = be32(b + o + 2);
      s->tsecr = be32(b + o + 6);
      s->tsopt = 1;
    }
    o += len;
  }
}

/* Decodes the headers of b[0, caplen) of link type lt into *s; returns 1 (FAST: write_rec can
 * write its record) or 0 (SLOW: use the reference). *s is then still read for where the headers
 * end (walked_headers_end: retention's headers-only cut). */
static inline __attribute__((always_inline)) int parse(St *s, const uint8_t *b, uint32_t caplen,
                                                       uint32_t lt, const uint8_t *ports) {
  /* Every field is set before it is read: no memset of the whole state (this runs per packet). */
  s->nip = 0;
  s->ntun = 0;
  s->seq = s->ack = s->tsval = s->tsecr = 0;
  s->flags = 0;
  s->window = 0;
  s->tcp = 0;
  s->tsopt = 0;
  s->cur_v6 = 0;
  s->ip_wire_end = 0;
  s->b = b;
  s->caplen = caplen;
  s->len = caplen;
  s->ports = ports;
  s->pending = -1;
  s->ip_id = -1;
  s->pay_off = -1;
  s->pay_end = -1;
  s->tail_at = -1;
  s->tail_proto = -1;
  s->stop_off = 0; /* a link type not known here: nothing is known to be a header */
  uint32_t off = 0;
  int nx;
  /* The frame comes cold from the ring (the kernel wrote it on another core): start loading its
   * second and third cache lines (inner headers, payload) while the first one is parsed. */
  if (caplen > 64) __builtin_prefetch(b + 64);
  if (caplen > 128) __builtin_prefetch(b + 128);

  switch (lt & 0xffff) {
    case 1: nx = NX_ETH; break;
    case 101: case 12: case 14: case 228: case 229:
      if (!NEED(0, 1)) return 0;
      nx = (b[0] >> 4) == 4 ? NX_V4 : (b[0] >> 4) == 6 ? NX_V6 : NX_SLOW;
      break;
    case 113: {
      if (!NEED(0, 16)) return 0;
      uint16_t proto = be16(b + 14);
      off = 16;
      s->stop_off = off;
      if (proto == 0x0004) return 0; /* 802.2 LLC */
      nx = ethertype_next(s, &off, proto, 1);
      break;
    }
    case 276: {
      if (!NEED(0, 20)) return 0;
      uint16_t proto = be16(b);
      off = 20;
      s->stop_off = off;
      if (proto == 0x0004) return 0; /* 802.2 LLC */
      nx = ethertype_next(s, &off, proto, 1);
      break;
    }
    case 0: case 108: {
      if (!NEED(0, 4)) return 0;
      uint32_t fam = be32(b);
      if ((lt & 0xffff) == 0 && (fam & 0xffff0000u) != 0)
        fam = ((fam >> 24) | ((fam >> 8) & 0xff00u)) & 0xffffu;
      off = 4;
      nx = fam == 2 ? NX_V4 : (fam == 24 || fam == 28 || fam == 30) ? NX_V6 : NX_SLOW;
      break;
    }
    default: return 0;
  }

  int steps = 0;
  while (nx > NX_DONE) {
    s->stop_off = off;
    if (++steps > 16) return 0;
    switch (nx) {
      case NX_ETH: {
        if (!NEED(off, 14)) return 0;
        uint16_t type = be16(b + off + 12);
        off += 14;
        s->stop_off = off;
        if (type <= 1500) return 0; /* LLC */
        nx = ethertype_next(s, &off, type, 1);
        break;
      }
      case NX_V4:
      case NX_V6: {
        uint32_t at = off, hlen, wire_end;
        int proto;
        if (nx == NX_V4) {
          if (!NEED(at, 20)) return 0;
          uint8_t v = b[at];
          if ((v >> 4) != 4) return 0;
          hlen = (uint32_t)(v & 0x0f) * 4;
          if (hlen < 20) return 0;
          uint32_t total = be16(b + at + 2);
          uint16_t frag = be16(b + at + 6);
          if (total == 0 || total < hlen || (frag & 0x1fff) != 0) {
            /* TSO length (the reference takes the captured length), or a later fragment (no
             * transport header: the payload starts after the IP header). */
            if (total == 0 || total >= hlen) {
              s->tail_at = at + hlen;
              s->tail_proto = (frag & 0x1fff) != 0 ? -1 : b[at + 9];
            }
            return 0;
          }
          proto = b[at + 9];
          if (!begin_ip(s, 0, b + at + 12, b + at + 16, proto)) return 0;
          s->ip_id = be16(b + at + 4);
          wire_end = at + total;
          s->ip_wire_end = wire_end;
          if (wire_end < s->len) s->len = wire_end;
          if (!NEED(at, hlen)) return 0;
          s->cur_v6 = 0;
        } else {
          if (!NEED(at, 40)) return 0;
          if ((b[at] >> 4) != 6) return 0;
          uint32_t plen = be16(b + at + 4);
          if (plen == 0) { /* jumbogram / TSO */
            s->tail_at = at + 40;
            s->tail_proto = b[at + 6];
            return 0;
          }
          proto = b[at + 6];
          if (!begin_ip(s, 1, b + at + 8, b + at + 24, proto)) return 0;
          hlen = 40;
          wire_end = at + 40 + plen;
          s->ip_wire_end = wire_end;
          if (wire_end < s->len) s->len = wire_end;
          s->cur_v6 = 1;
        }
        /* ipNext(proto, at + hlen) */
        uint32_t next = at + hlen;
        s->pay_off = next;
        s->pay_end = s->ip_wire_end;
        off = next;
        switch (proto) {
          case 4:
          case 41:
            if (s->ntun == 2) return 0;
            s->tun_kind[s->ntun] = proto == 4 ? (s->cur_v6 ? TK_4IN6 : TK_IPIP)
                                              : (s->cur_v6 ? TK_6IN6 : TK_6IN4);
            s->tun_has_id[s->ntun] = 0;
            s->ntun++;
            nx = proto == 4 ? NX_V4 : NX_V6;
            if (!NEED(off, 1)) return 0;
            if ((b[off] >> 4) != (proto == 4 ? 4 : 6)) return 0;
            break;
          case 6: {
            if (!NEED(off, 20)) return 0;
            IpTuple *t = &s->ip[s->pending];
            t->has_ports = 1;
            t->sport = be16(b + off);
            t->dport = be16(b + off + 2);
            s->pending = -1;
            s->tcp = 1;
            s->seq = be32(b + off + 4);
            s->ack = be32(b + off + 8);
            uint16_t of = be16(b + off + 12);
            s->flags = (uint8_t)of;
            s->window = be16(b + off + 14);
            uint32_t thl = (uint32_t)(of >> 12) * 4;
            if (thl < 20) return 0;
            s->pay_off = off + thl;
            s->pay_end = s->ip_wire_end;
            if (!NEED(off, thl)) return 0;
            if (thl > 20) tcp_options(s, off + 20, off + thl);
            nx = NX_DONE;
            break;
          }
          case 17: {
            if (!NEED(off, 8)) return 0;
            IpTuple *t = &s->ip[s->pending];
            uint16_t sport = be16(b + off), dport = be16(b + off + 2);
            t->has_ports = 1;
            t->sport = sport;
            t->dport = dport;
            s->pending = -1;
            uint32_t ulen = be16(b + off + 4);
            s->pay_off = off + 8;
            s->pay_end = s->ip_wire_end;
            if (ulen != 0 && ulen < 8) return 0;
            if (s->ip_wire_end <= off + 8) {
              nx = NX_DONE;
              break;
            }
            uint8_t kind = ports[dport] ? ports[dport] : ports[sport];
            if (kind == SUMMARY_PORT_NONE) {
              nx = NX_DONE;
              break;
            }
            if (kind != SUMMARY_PORT_VXLAN && kind != SUMMARY_PORT_GENEVE) return 0;
            uint32_t at8 = off + 8;
            if (!NEED(at8, 8) || s->ntun == 2) return 0;
            uint32_t vni = be32(b + at8 + 4) >> 8;
            s->tun_kind[s->ntun] = kind == SUMMARY_PORT_VXLAN ? TK_VXLAN : TK_GENEVE;
            s->tun_has_id[s->ntun] = 1;
            s->tun_id[s->ntun] = vni;
            s->ntun++;
            if (kind == SUMMARY_PORT_VXLAN) {
              off = at8 + 8;
              nx = NX_ETH;
            } else {
              uint8_t first = b[at8];
              if ((first >> 6) != 0) return 0;
              uint32_t olen = (uint32_t)(first & 0x3f) * 4;
              uint16_t protocol = be16(b + at8 + 2);
              if (!NEED(at8, 8 + olen)) return 0;
              off = at8 + 8 + olen;
              nx = ethertype_next(s, &off, protocol, 1);
            }
            break;
          }
          /* Protocols the reference decodes further (or quotes a tuple for): its job. */
          case 0: case 43: case 60: case 44: case 51: case 132: case 1: case 58: case 47: case 50:
            s->tail_at = off;
            s->tail_proto = proto;
            return 0;
          default:
            nx = NX_DONE; /* a leaf: the tuple names the protocol, no ports */
            break;
        }
        break;
      }
      default: return 0;
    }
  }
  if (nx == NX_SLOW || s->nip == 0) return 0;
  return 1;
}

/* The record's direction-free flow hash (offset 28; a prefilter key, verified by the caller):
 * each endpoint mixed word by word, the two combined symmetrically. */
static inline uint32_t flow_hash(const uint8_t *src, const uint8_t *dst, uint32_t alen,
                                 uint32_t sport, uint32_t dport, int proto) {
  uint32_t ha = 0x9e3779b9u, hb = 0x9e3779b9u;
  for (uint32_t k = 0; k < alen; k += 4) {
    ha = (ha ^ be32(src + k)) * 0x85ebca6bu;
    ha ^= ha >> 13;
    hb = (hb ^ be32(dst + k)) * 0x85ebca6bu;
    hb ^= hb >> 13;
  }
  ha = (ha ^ sport) * 0xc2b2ae35u;
  hb = (hb ^ dport) * 0xc2b2ae35u;
  uint32_t h = (ha + hb) ^ ((ha ^ hb) >> 7) ^ ((uint32_t)proto * 0x27d4eb2fu);
  h ^= h >> 16;
  return h;
}

/* The payload hash (its first 64 bytes) and request-line hash of a payload at b[po, pay_end)
 * captured to cap_end (> po): the record's fields 80 and 84. */
static inline __attribute__((always_inline)) void payload_hashes(const uint8_t *b, uint32_t po,
                                                                  uint32_t cap_end,
                                                                  uint32_t *payload,
                                                                  uint32_t *line) {
  /* Request line: up to CR/LF or 128 bytes, without a trailing " HTTP/1.0" / " HTTP/1.1". */
  uint32_t end = cap_end < po + 128 ? cap_end : po + 128;
  end = line_end(b, po, end);
  if (end - po >= 9 && (b[end - 1] == '0' || b[end - 1] == '1') &&
      memcmp(b + end - 9, " HTTP/1.", 8) == 0)
    end -= 9;
  uint32_t pl_end = cap_end < po + 64 ? cap_end : po + 64;
  *payload = xxh32(b, po, pl_end);
  *line = end == pl_end ? *payload : xxh32(b, po, end);
}

/* The payload and request-line hashes of a payload at b[po, pay_end) captured to cap_end. */
static inline __attribute__((always_inline)) void write_hashes(const uint8_t *b, uint32_t po,
                                                                uint32_t cap_end, uint8_t *rec) {
  uint32_t payload, line;
  payload_hashes(b, po, cap_end, &payload, &line);
  le32(rec + 80, payload);
  le32(rec + 84, line);
}

/* Writes the record of a frame parse() took: the fields, the flow hash, the payload's keys (its
 * two hashes only when `hashes`: else summary_hashes writes them later). */
static inline __attribute__((always_inline)) void write_rec(const St *s, uint8_t *rec,
                                                             int hashes) {
  const uint8_t *b = s->b;
  uint32_t caplen = s->caplen;
  /* Zero the fields that are not always written (ports .. hashes); addresses are copied below and
   * read only as far as their family says, the marker only as far as its length says. */
  {
    /* Straight-line 16-byte stores: a memset (or a loop) of this size compiles to `rep stos`,
     * which cost 13 % of the decoder. */
    typedef uint64_t u64x2 __attribute__((vector_size(16), aligned(1)));
    const u64x2 z = {0, 0};
    *(u64x2 *)(rec + 0) = z;
    *(u64x2 *)(rec + 16) = z;
    *(u64x2 *)(rec + 32) = z;
    *(u64x2 *)(rec + 48) = z;
    *(u64x2 *)(rec + 64) = z;
    const uint64_t z8 = 0;
    memcpy(rec + 80, &z8, 8);
  }
  rec[188] = 0;
  const IpTuple *in = &s->ip[s->nip - 1];
  const IpTuple *out = &s->ip[0];
  int encapsulated = s->nip > 1 || s->ntun > 0;
  uint8_t fl = 0;
  rec[0] = 1;
  rec[2] = (uint8_t)in->proto;
  rec[4] = (uint8_t)transport_index(in->proto);
  if (in->v6) fl |= SF_INNER_V6;
  uint8_t pf = in->has_ports ? 1 : 0;
  if (in->has_ports) {
    le16(rec + 32, in->sport);
    le16(rec + 34, in->dport);
  }
  uint32_t alen_in = in->v6 ? 16 : 4;
  memcpy(rec + 88, in->src, alen_in);
  memcpy(rec + 104, in->dst, alen_in);
  if (encapsulated) {
    fl |= SF_OUTER;
    if (out->v6) fl |= SF_OUTER_V6;
    rec[3] = (uint8_t)out->proto;
    rec[5] = (uint8_t)transport_index(out->proto);
    if (out->has_ports) {
      pf |= 2;
      le16(rec + 36, out->sport);
      le16(rec + 38, out->dport);
    }
    uint32_t alen_out = out->v6 ? 16 : 4;
    memcpy(rec + 120, out->src, alen_out);
    memcpy(rec + 136, out->dst, alen_out);
  }
  rec[7] = (uint8_t)s->ntun;
  for (int i = 0; i < s->ntun; i++) {
    rec[40 + 2 * i] = s->tun_kind[i];
    rec[41 + 2 * i] = s->tun_has_id[i];
    le32(rec + 44 + 4 * i, s->tun_id[i]);
  }
  /* Direction-free flow hash (a prefilter key, verified by the caller): each endpoint mixed
   * word by word, the two combined symmetrically. */
  le32(rec + 28, flow_hash(in->src, in->dst, alen_in, in->has_ports ? in->sport : 0,
                           in->has_ports ? in->dport : 0, in->proto));
  if (s->ip_id >= 0) {
    fl |= SF_IPID;
    le32(rec + 52, (uint32_t)s->ip_id);
  }
  if (s->tcp) {
    fl |= SF_TCP;
    le32(rec + 56, s->seq);
    le32(rec + 60, s->ack);
    rec[64] = s->flags;
    le16(rec + 66, s->window);
  }
  if (s->tsopt) {
    fl |= SF_TSOPT;
    le32(rec + 68, s->tsval);
    le32(rec + 72, s->tsecr);
  }
  if (s->pay_off >= 0 && s->pay_end > s->pay_off) {
    uint32_t po = (uint32_t)s->pay_off;
    uint32_t pay_len = (uint32_t)(s->pay_end - s->pay_off);
    uint32_t cap_end = (uint32_t)s->pay_end < caplen ? (uint32_t)s->pay_end : caplen;
    fl |= SF_PAYLOAD;
    le32(rec + 76, pay_len);
    if (cap_end > po) {
      pf |= PF_HASHES;
      if (hashes) write_hashes(b, po, cap_end, rec);
      /* Probe marker: the first "hoptrace-probe-" followed by 1..32 of [0-9a-z]. */
      uint32_t to = cap_end < po + 512 ? cap_end : po + 512;
      for (uint32_t i = mark_from(b, po, to); i != UINT32_MAX;
           i = mark_from(b, i + mark_shift[b[i + MARK_LEN - 1]], to)) {
        uint32_t id0 = i + MARK_LEN, j = id0;
        while (j < to && j - id0 < 32 &&
               ((b[j] >= '0' && b[j] <= '9') || (b[j] >= 'a' && b[j] <= 'z')))
          j++;
        if (j == id0) continue;
        fl |= SF_MARKER;
        rec[65] = (uint8_t)(j - id0);
        memcpy(rec + 152, b + id0, j - id0);
        le32(rec + 184, fnv(b, id0, j));
        break;
      }
    }
  }
  rec[1] = fl;
  rec[6] = pf;
}

/* Decodes b[0, caplen) of link type lt into rec; returns 1 (fast) or 0 (slow: use the reference).
 * s: the walk's state, read after it for where the headers end. */
static inline int fast_st(St *s, const uint8_t *b, uint32_t caplen, uint32_t lt,
                          const uint8_t *ports, uint8_t *rec, int hashes) {
  if (!parse(s, b, caplen, lt, ports)) return 0;
  write_rec(s, rec, hashes);
  return 1;
}

static inline uint32_t rd32(const uint8_t *p, int le) {
  return le ? ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24))
            : be32(p);
}

/* Where b's headers end after a fast walk that ended in state s (ok: it took the frame). */
static uint32_t walked_headers_end(const St *s, const uint8_t *b, uint32_t caplen, int ok) {
  if (ok) return s->pay_off < (int64_t)caplen ? (uint32_t)s->pay_off : caplen;
  if (s->tail_at >= 0)
    return headers_tail(b, caplen, (uint32_t)s->tail_at, s->tail_proto, (uint32_t)s->tail_at);
  int64_t end = s->pay_off >= 0 ? s->pay_off : s->stop_off >= 0 ? s->stop_off : (int64_t)caplen;
  return end < (int64_t)caplen ? (uint32_t)end : caplen;
}

uint32_t summary_headers_end(const uint8_t *b, uint32_t caplen, uint32_t linktype,
                             const uint8_t *ports) {
  St st;
  int ok = parse(&st, b, caplen, linktype, ports);
  return walked_headers_end(&st, b, caplen, ok);
}

int summary_one(const uint8_t *b, uint32_t caplen, uint32_t wirelen, uint64_t ts,
                uint32_t linktype, const uint8_t *ports, uint8_t *rec, uint32_t raw_offset,
                uint32_t *headers_end) {
  return summary_one_ex(b, caplen, wirelen, ts, linktype, ports, rec, raw_offset, headers_end, 1);
}

void summary_hashes(const uint8_t *b, uint32_t caplen, uint32_t headers_end, uint8_t *rec) {
  if (rec[0] != 1 || (rec[6] & PF_HASHES) == 0) return;
  uint32_t po = headers_end;
  uint64_t pay_end = (uint64_t)po + rd_le32_at(rec + 76);
  uint32_t cap_end = pay_end < caplen ? (uint32_t)pay_end : caplen;
  if (cap_end > po) write_hashes(b, po, cap_end, rec);
}

int summary_one_ex(const uint8_t *b, uint32_t caplen, uint32_t wirelen, uint64_t ts,
                   uint32_t linktype, const uint8_t *ports, uint8_t *rec, uint32_t raw_offset,
                   uint32_t *headers_end, int hashes) {
  St st;
  int ok = fast_st(&st, b, caplen, linktype, ports, rec, hashes);
  if (headers_end != NULL) *headers_end = walked_headers_end(&st, b, caplen, ok);
  if (!ok) rec[0] = 0;
  le32(rec + 8, caplen);
  le32(rec + 12, wirelen);
  le32(rec + 16, (uint32_t)ts);
  le32(rec + 20, (uint32_t)(ts >> 32));
  le32(rec + 24, raw_offset);
  return ok;
}

/*
 * The commonest shape without the whole parse (fold.c's fold_quick: a packet counted into its
 * flow needs no record). Ethernet without VLAN tags, IPv4 without options, not a later fragment,
 * TCP, or UDP whose ports are not a tunnel's:
 *
 *    0                   1                   2                   3
 *    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 * 0 |  destination MAC, source MAC (12 bytes) ... | EtherType 0x0800|
 *14 |Ver=4| IHL=5 |      TOS      |          Total Length         |
 *18 |       Identification          |Flags|  Fragment Offset = 0    |
 *22 |      TTL      |  Protocol     |        Header Checksum        |
 *26 |                       Source Address                          |
 *30 |                    Destination Address                        |
 *34 |  Source Port                  |  Destination Port             |  TCP (RFC 9293) or
 *   |  ... TCP: seq, ack, data offset and flags at 46 / UDP: length at 38  ...  |  UDP (RFC 768)
 *   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *
 * Every test is the one parse() makes on that path, in its order, so a frame taken here is one
 * parse() takes as FAST with these values (test/unit/fold.test.ts runs the corpus both ways).
 */
int summary_quick(const uint8_t *b, uint32_t caplen, uint32_t lt, const uint8_t *ports,
                  SummaryQuick *q) {
  if ((lt & 0xffff) != 1 || caplen < 34 || be16(b + 12) != 0x0800 || b[14] != 0x45) return 0;
  uint32_t total = be16(b + 16);
  if (total < 20 || (be16(b + 20) & 0x1fff) != 0) return 0;
  uint32_t wire_end = 14 + total, len = wire_end < caplen ? wire_end : caplen;
  if (len < 34) return 0;
  uint8_t proto = b[23];
  uint32_t po;
  q->tcp_flags = 0;
  if (proto == 6) {
    if (len < 54) return 0;
    uint32_t thl = (uint32_t)(b[46] >> 4) * 4;
    if (thl < 20 || 34 + thl > len) return 0;
    q->tcp_flags = b[47];
    po = 34 + thl;
  } else if (proto == 17) {
    if (len < 42) return 0;
    uint32_t ulen = be16(b + 38);
    if (ulen != 0 && ulen < 8) return 0;
    if (wire_end > 42 && (ports[be16(b + 36)] || ports[be16(b + 34)])) return 0;
    po = 42;
  } else {
    return 0;
  }
  q->proto = proto;
  q->sport = be16(b + 34);
  q->dport = be16(b + 36);
  memcpy(&q->src, b + 26, 4);
  memcpy(&q->dst, b + 30, 4);
  q->hash = flow_hash(b + 26, b + 30, 4, q->sport, q->dport, proto);
  q->headers_end = po < caplen ? po : caplen;
  uint32_t cap_end = len;
  uint32_t to = cap_end < po + 512 ? cap_end : po + 512;
  q->marker = wire_end > po && cap_end > po && mark_from(b, po, to) != UINT32_MAX;
  return 1;
}

/* One record: the decoded summary, or SLOW with only the frame's place, lengths and time. */
static inline void emit(const uint8_t *src, uint32_t data, uint32_t caplen, uint32_t wirelen,
                        uint64_t ts, uint32_t linktype, const uint8_t *ports, uint8_t *rec) {
  St st;
  if (!fast_st(&st, src + data, caplen, linktype, ports, rec, 1)) {
    memset(rec, 0, 32);
    rec[0] = 0;
  }
  le32(rec + 8, caplen);
  le32(rec + 12, wirelen);
  le32(rec + 16, (uint32_t)ts);
  le32(rec + 20, (uint32_t)(ts >> 32));
  le32(rec + 24, data);
}

/* The seen-map slot of a TCP port pair, either direction (record-scans.ts SelectScan.slot). */
static inline uint32_t gate_slot(uint32_t pw) {
  uint32_t a = pw & 0xffff, b = pw >> 16;
  return ((a < b ? (a << 16) | b : (b << 16) | a) * 0x9e3779b1u) >> 12;
}

/* What a gate decides a frame by: its inner IP protocol, TCP flags and ports word; for TCP that
 * classify() took, also where its inner IPv4 and TCP headers and its payload start, and where
 * the inner IP packet ends (the quiet test's quick path, quiet_quick). */
typedef struct {
  uint32_t proto, pw;
  uint8_t flags;
  uint32_t ip_at, tcp_at, po, wire_end;
} GateKey;

/*
 * The gate's key of a frame of the shapes nearly all traffic has — Ethernet, IPv4 without options,
 * TCP or UDP, inside one VXLAN tunnel or not — without the whole parse: 1 when parse() would take
 * it as FAST with that TCP or UDP inside (*k filled), -1 for anything else (parse() decides). Every
 * test is the one parse() makes on that path, in its order; test/unit/summary-window.test.ts checks
 * that every prefix of such frames is decided as parse() decides it.
 */
static inline int classify(const uint8_t *b, uint32_t caplen, uint32_t lt, const uint8_t *ports,
                           GateKey *k) {
  if ((lt & 0xffff) != 1 || caplen < 34 || be16(b + 12) != 0x0800) return -1;
  uint32_t at = 14, len = caplen;
  for (int layer = 0;; layer++) {
    /* IPv4 at `at`, 20-byte header: what parse() checks of it. */
    if (b[at] != 0x45) return -1;
    uint32_t total = be16(b + at + 2);
    if (total < 20 || (be16(b + at + 6) & 0x1fff) != 0) return -1;
    uint32_t wire_end = at + total;
    if (wire_end < len) len = wire_end;
    if (at + 20 > len) return -1;
    uint32_t off = at + 20;
    uint8_t proto = b[at + 9];
    if (proto == 6) {
      if (off + 20 > len) return -1;
      uint32_t thl = (uint32_t)(b[off + 12] >> 4) * 4;
      if (thl < 20 || off + thl > len) return -1;
      k->proto = 6;
      k->flags = b[off + 13];
      k->pw = (uint32_t)be16(b + off) | ((uint32_t)be16(b + off + 2) << 16);
      k->ip_at = at;
      k->tcp_at = off;
      k->po = off + thl;
      k->wire_end = wire_end;
      return 1;
    }
    if (proto != 17 || off + 8 > len) return -1;
    uint32_t ulen = be16(b + off + 4);
    if (ulen != 0 && ulen < 8) return -1;
    uint16_t sport = be16(b + off), dport = be16(b + off + 2);
    uint8_t kind = wire_end <= off + 8 ? SUMMARY_PORT_NONE : ports[dport] ? ports[dport] : ports[sport];
    if (kind == SUMMARY_PORT_NONE) {
      k->proto = 17;
      k->flags = 0;
      k->pw = (uint32_t)sport | ((uint32_t)dport << 16);
      return 1;
    }
    /* VXLAN: its 8-byte header, an Ethernet header, then IPv4 again (a second tunnel: parse). */
    if (kind != SUMMARY_PORT_VXLAN || layer == 1 || off + 8 + 8 + 14 + 20 > len) return -1;
    at = off + 8 + 8 + 14;
    if (be16(b + at - 2) != 0x0800) return -1;
  }
}

/* Whether the gate gives a FAST frame of key k a record; *stop_after when the run must stop. */
static inline int gate_wants(const SummaryGate *g, uint64_t ts, const GateKey *k, int may_change,
                             int *stop_after) {
  const uint32_t f = g->flags;
  if ((f & SUMMARY_GATE_SYN) && k->proto == 6 && (k->flags & 0x12) == 0x02) {
    if (may_change) *stop_after = 1;
    return 1;
  }
  if ((f & SUMMARY_GATE_WINDOW) && (ts < g->lo || ts > g->hi)) return 0;
  if ((f & SUMMARY_GATE_PROTO) && k->proto != g->proto) return 0;
  if (f & SUMMARY_GATE_PORTS) {
    for (uint32_t i = 0; i < g->n_ports; i++)
      if (g->ports[i] == k->pw) return 1;
    return 0;
  }
  return 1;
}

/* A FAST frame of key k the gate leaves out: counted when useful, its ports marked when TCP. */
static inline void gate_skip(SummaryGate *g, const GateKey *k) {
  int tr = transport_index((int)k->proto);
  if (tr == TR_TCP || tr == TR_UDP) g->skipped_useful++;
  if (k->proto == 6 && (g->flags & SUMMARY_GATE_SEEN)) {
    uint32_t slot = gate_slot(k->pw);
    g->seen[slot >> 5] |= 1u << (slot & 31);
  }
}

/* Whether a sorted key list holds v. */
static inline int keys_has(const uint32_t *k, uint32_t n, uint32_t v) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) >> 1;
    if (k[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo < n && k[lo] == v;
}

/* The quiet test (SUMMARY_GATE_QUIET) on a FAST record, in LaterScan.block's order. */
static inline int gate_quiet(const SummaryGate *g, const uint8_t *rec, const uint8_t *taken) {
  const uint8_t fl = rec[1];
  if (!(fl & SF_PAYLOAD) || (fl & SF_MARKER)) return 0;
  const uint32_t *k = g->keys;
  if (keys_has(k, g->n_seq, rdle32(rec + 56))) return 0;
  k += g->n_seq;
  if (keys_has(k, g->n_ack, rdle32(rec + 60))) return 0;
  k += g->n_ack;
  if (keys_has(k, g->n_data, rdle32(rec + 80)) || keys_has(k, g->n_data, rdle32(rec + 84)))
    return 0;
  const uint32_t b = rdle32(rec + 28) & (SUMMARY_GATE_HOT_BUCKETS - 1);
  return g->hot[b] == 0 && !(taken[b >> 3] & (1u << (b & 7)));
}

/*
 * The quiet test (gate_quiet) on a TCP frame classify() took, from its bytes: 1 when its record
 * would be quiet, 0 when the record must decide. It reads what the record's test reads — whether
 * there is payload, seq, ack, the two payload hashes, the flow hash's bucket — where parse() and
 * write_rec() would take them (classify() made parse()'s tests on the way), and sends a payload
 * holding the probe marker's prefix anywhere write_rec() looks for it to the record, which tells a
 * marker from a bare prefix. So a quiet data segment costs its hashes, not the parse and the
 * record; test/unit/summary-quiet.test.ts checks it against the record (SUMMARY_GATE_NO_QUICK).
 */
static inline int quiet_quick(const SummaryGate *g, const uint8_t *b, uint32_t caplen,
                              const GateKey *k, const uint8_t *taken) {
  const uint32_t po = k->po, pay_end = k->wire_end;
  if (pay_end <= po) return 0; /* no payload: never quiet */
  const uint32_t *keys = g->keys;
  if (keys_has(keys, g->n_seq, be32(b + k->tcp_at + 4))) return 0;
  keys += g->n_seq;
  if (keys_has(keys, g->n_ack, be32(b + k->tcp_at + 8))) return 0;
  keys += g->n_ack;
  const uint32_t bucket = flow_hash(b + k->ip_at + 12, b + k->ip_at + 16, 4, k->pw & 0xffff,
                                    k->pw >> 16, 6) &
                          (SUMMARY_GATE_HOT_BUCKETS - 1);
  if (g->hot[bucket] != 0 || (taken[bucket >> 3] & (1u << (bucket & 7)))) return 0;
  uint32_t payload = 0, line = 0; /* no captured payload: the record's hashes stay 0 */
  const uint32_t cap_end = pay_end < caplen ? pay_end : caplen;
  if (cap_end > po) {
    const uint32_t to = cap_end < po + 512 ? cap_end : po + 512;
    if (mark_from(b, po, to) != UINT32_MAX) return 0;
    payload_hashes(b, po, cap_end, &payload, &line);
  }
  return !keys_has(keys, g->n_data, payload) && !keys_has(keys, g->n_data, line);
}

/*
 * emit() behind a gate: returns 1 when the frame got a record in rec, 0 when it was only counted;
 * *stop_after is set when the run must stop after this frame (SUMMARY_GATE_SYN). Decided after
 * the headers and before the record: a frame without one costs its headers' look (classify, else
 * parse), not its keys.
 */
static inline int gate_emit(const uint8_t *src, uint32_t data, uint32_t caplen, uint32_t wirelen,
                            uint64_t ts, uint32_t linktype, const uint8_t *ports, uint8_t *rec,
                            SummaryGate *g, int *stop_after, uint8_t *taken) {
  St st;
  GateKey k;
  const uint32_t f = g->flags;
  const int may_change = (f & SUMMARY_GATE_SYN) && (!(f & SUMMARY_GATE_BEST) || ts < g->best_ts);
  if (classify(src + data, caplen, linktype, ports, &k) == 1) {
    if (!gate_wants(g, ts, &k, may_change, stop_after) ||
        (k.proto == 6 &&
         (f & (SUMMARY_GATE_QUIET_ON | SUMMARY_GATE_QUIET | SUMMARY_GATE_NO_QUICK)) ==
             (SUMMARY_GATE_QUIET_ON | SUMMARY_GATE_QUIET) &&
         quiet_quick(g, src + data, caplen, &k, taken))) {
      gate_skip(g, &k);
      return 0;
    }
  }
  if (parse(&st, src + data, caplen, linktype, ports)) {
    const IpTuple *in = &st.ip[st.nip - 1];
    k.proto = (uint32_t)in->proto;
    k.flags = in->proto == 6 ? st.flags : 0;
    k.pw = in->has_ports ? (uint32_t)in->sport | ((uint32_t)in->dport << 16) : 0;
    if (!gate_wants(g, ts, &k, may_change, stop_after)) {
      gate_skip(g, &k);
      return 0;
    }
    write_rec(&st, rec, 1);
    if ((f & SUMMARY_GATE_QUIET_ON) && (f & SUMMARY_GATE_QUIET)) {
      if (gate_quiet(g, rec, taken)) {
        gate_skip(g, &k);
        return 0;
      }
      /* Given out: the selection may now buffer or relate this bucket's connection. */
      const uint32_t b = rdle32(rec + 28) & (SUMMARY_GATE_HOT_BUCKETS - 1);
      taken[b >> 3] |= (uint8_t)(1u << (b & 7));
    }
  } else {
    memset(rec, 0, 32);
    if (may_change || ((f & SUMMARY_GATE_QUIET_ON) && (f & SUMMARY_GATE_QUIET))) *stop_after = 1;
  }
  le32(rec + 8, caplen);
  le32(rec + 12, wirelen);
  le32(rec + 16, (uint32_t)ts);
  le32(rec + 20, (uint32_t)(ts >> 32));
  le32(rec + 24, data);
  return 1;
}

size_t summary_run(const uint8_t *src, size_t src_len, size_t pos, int layout, uint32_t linktype,
                   uint32_t max_caplen, const uint8_t *ports, uint8_t *out, size_t max_records,
                   size_t *next_pos, int *stop) {
  return summary_run_gate(src, src_len, pos, layout, linktype, max_caplen, ports, out,
                          max_records, next_pos, stop, NULL, NULL);
}

size_t summary_run_gate(const uint8_t *src, size_t src_len, size_t pos, int layout,
                        uint32_t linktype, uint32_t max_caplen, const uint8_t *ports, uint8_t *out,
                        size_t max_records, size_t *next_pos, int *stop, SummaryGate *gate,
                        SummaryFlaws *flaws) {
  size_t n = 0;
  SummaryFlaws none;
  if (flaws == NULL) flaws = &none;
  flaws->times = flaws->lengths = 0;
  *stop = SUMMARY_STOP_END;
  /* Buckets of the records this run gave out (SUMMARY_GATE_QUIET). */
  uint8_t taken[SUMMARY_GATE_HOT_BUCKETS / 8];
  if (gate != NULL) {
    gate->frames = gate->skipped_useful = 0;
    gate->ts_min = UINT64_MAX;
    gate->ts_max = 0;
    if (gate->flags & SUMMARY_GATE_QUIET_ON) memset(taken, 0, sizeof taken);
  }
  while (n < max_records) {
    uint32_t caplen, wirelen, data;
    uint64_t ts;
    if (layout == SUMMARY_LAYOUT_BATCH) {
      if (pos + 16 > src_len) break;
      caplen = rd32(src + pos, 1);
      wirelen = rd32(src + pos + 4, 1);
      ts = (uint64_t)rd32(src + pos + 8, 1) | ((uint64_t)rd32(src + pos + 12, 1) << 32);
      data = (uint32_t)(pos + 16);
      if ((size_t)data + caplen > src_len) {
        *stop = SUMMARY_STOP_BAD;
        break;
      }
      pos = data + (((size_t)caplen + 7u) & ~(size_t)7u);
    } else {
      int le = layout == SUMMARY_LAYOUT_PCAP_LE_US || layout == SUMMARY_LAYOUT_PCAP_LE_NS;
      int ns = layout == SUMMARY_LAYOUT_PCAP_LE_NS || layout == SUMMARY_LAYOUT_PCAP_BE_NS;
      if (pos + 16 > src_len) break;
      uint32_t sec = rd32(src + pos, le), frac = rd32(src + pos + 4, le);
      caplen = rd32(src + pos + 8, le);
      wirelen = rd32(src + pos + 12, le);
      if (caplen > max_caplen) {
        *stop = SUMMARY_STOP_BAD;
        break;
      }
      if (pos + 16 + caplen > src_len) break; /* the rest of this record is in the next chunk */
      /* Walked: read as given, counted as pcap-file.ts counts (CaptureFileStats.invalid). */
      if (frac >= (ns ? 1000000000u : 1000000u)) flaws->times++;
      if (caplen > wirelen) flaws->lengths++;
      ts = (uint64_t)sec * 1000000000ull + (uint64_t)frac * (ns ? 1ull : 1000ull);
      data = (uint32_t)(pos + 16);
      pos = data + caplen;
    }
    if (gate == NULL) {
      emit(src, data, caplen, wirelen, ts, linktype, ports, out + n * SUMMARY_BYTES);
      n++;
      continue;
    }
    int stop_after = 0;
    if (ts < gate->ts_min) gate->ts_min = ts;
    if (ts > gate->ts_max) gate->ts_max = ts;
    if (gate_emit(src, data, caplen, wirelen, ts, linktype, ports, out + n * SUMMARY_BYTES, gate,
                  &stop_after, taken))
      gate->frame_of[n++] = gate->frames;
    gate->frames++;
    if (stop_after) {
      *stop = SUMMARY_STOP_GATE;
      break;
    }
  }
  if (n == max_records) *stop = SUMMARY_STOP_FULL;
  *next_pos = pos;
  return n;
}

/*
 * pcapng Enhanced Packet Block (draft-ietf-opsawg-pcapng §4.3):
 *
 *    0                   1                   2                   3
 *    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *   +---------------------------------------------------------------+
 * 0 |                    Block Type = 0x00000006                    |
 * 4 |                      Block Total Length                       |
 * 8 |                         Interface ID                          |
 *12 |                        Timestamp (High)                       |
 *16 |                        Timestamp (Low)                        |
 *20 |                    Captured Packet Length                     |
 *24 |                    Original Packet Length                     |
 *28 /              Packet Data, padded to 32 bits                   /
 *   /                      Options (variable)                       /
 *   |                      Block Total Length                       |
 *   +---------------------------------------------------------------+
 *
 * Only what pcap-file.ts's reader would accept without a word is taken here; anything else —
 * another block type, an interface the table leaves out or does not describe, a length or trailer
 * the reader would refuse — stops the run at that block, and the reader reads it (and throws its
 * own error). Interfaces may alternate block by block (dumpcap -i a -i b).
 */
size_t summary_run_ng(const uint8_t *src, size_t src_len, size_t pos, int le, uint32_t max_block,
                      uint8_t *ifaces, uint32_t n_ifaces, const uint8_t *ports, uint8_t *out,
                      size_t max_records, size_t *next_pos, int *stop) {
  return summary_run_ng_gate(src, src_len, pos, le, max_block, ifaces, n_ifaces, ports, out,
                             max_records, next_pos, stop, NULL, NULL);
}

/* An interface table entry's if_tsoffset: a signed count of seconds (i64 LE at 16). */
static inline int64_t ng_tsoffset(const uint8_t *ifc) {
  return (int64_t)(((uint64_t)rd32(ifc + 20, 1) << 32) | rd32(ifc + 16, 1));
}

size_t summary_run_ng_gate(const uint8_t *src, size_t src_len, size_t pos, int le,
                           uint32_t max_block, uint8_t *ifaces, uint32_t n_ifaces,
                           const uint8_t *ports, uint8_t *out, size_t max_records,
                           size_t *next_pos, int *stop, SummaryGate *gate, SummaryFlaws *flaws) {
  size_t n = 0;
  SummaryFlaws none;
  if (flaws == NULL) flaws = &none;
  flaws->times = flaws->lengths = 0; /* a block's time has no fraction field: times stays 0 */
  *stop = SUMMARY_STOP_END;
  /* Buckets of the records this run gave out (SUMMARY_GATE_QUIET). */
  uint8_t taken[SUMMARY_GATE_HOT_BUCKETS / 8];
  if (gate != NULL) {
    gate->frames = gate->skipped_useful = 0;
    gate->ts_min = UINT64_MAX;
    gate->ts_max = 0;
    if (gate->flags & SUMMARY_GATE_QUIET_ON) memset(taken, 0, sizeof taken);
  }
  while (n < max_records) {
    if (pos + 32 > src_len) break;
    const uint8_t *b = src + pos;
    uint32_t len = rd32(b + 4, le), id = rd32(b + 8, le);
    uint8_t *ifc = id < n_ifaces ? ifaces + (size_t)id * SUMMARY_NG_IFACE_BYTES : NULL;
    uint32_t div = ifc != NULL ? rd32(ifc + 8, 1) : 0;
    if (rd32(b, le) != 6 || len < 32 || (len & 3) != 0 || len > max_block || div == 0) {
      *stop = SUMMARY_STOP_BLOCK;
      break;
    }
    if (pos + len > src_len) break; /* the rest of this block is in the next chunk */
    uint32_t caplen = rd32(b + 20, le), wirelen = rd32(b + 24, le);
    uint64_t units = ((uint64_t)rd32(b + 12, le) << 32) | rd32(b + 16, le);
    /* Below 2^96 scaled, and the offset's ns within ±2^93: no overflow in 128 bits. */
    __int128 ns = (__int128)((unsigned __int128)units * rd32(ifc + 4, 1) / div) +
                  (__int128)ng_tsoffset(ifc) * 1000000000;
    if (rd32(b + len - 4, le) != len || (uint64_t)caplen + 32 > len || ns < 0 ||
        (ns >> 64) != 0) {
      *stop = SUMMARY_STOP_BLOCK;
      break;
    }
    /* Walked: read as given, counted as pcap-file.ts's PcapngReader counts (CaptureFileStats.invalid). */
    if (caplen > wirelen) flaws->lengths++;
    uint8_t *rec = out + n * SUMMARY_BYTES;
    pos += len;
    ifc[12] = 1; /* the interface carried a packet */
    if (gate == NULL) {
      emit(src, (uint32_t)(pos - len + 28), caplen, wirelen, (uint64_t)ns, rd32(ifc, 1), ports,
           rec);
      le32(rec + 188, id);
      n++;
      continue;
    }
    int stop_after = 0;
    if ((uint64_t)ns < gate->ts_min) gate->ts_min = (uint64_t)ns;
    if ((uint64_t)ns > gate->ts_max) gate->ts_max = (uint64_t)ns;
    if (gate_emit(src, (uint32_t)(pos - len + 28), caplen, wirelen, (uint64_t)ns, rd32(ifc, 1),
                  ports, rec, gate, &stop_after, taken)) {
      le32(rec + 188, id);
      gate->frame_of[n++] = gate->frames;
    }
    gate->frames++;
    if (stop_after) {
      *stop = SUMMARY_STOP_GATE;
      break;
    }
  }
  if (n == max_records) *stop = SUMMARY_STOP_FULL;
  *next_pos = pos;
  return n;
}

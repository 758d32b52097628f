/*
 * headers.c — where a frame's headers end, for the frames the fast path (summary.c) leaves SLOW.
 *
 * Retention keeps a frame only up to the end of its innermost transport header unless the
 * capture asked for the payload (retain.c). For a FAST frame summary.c knows that offset already
 * (the payload start it hashes); for a SLOW one it knows where it stopped, and this walk goes on
 * from there over the shapes that are SLOW only because the fast path does not summarize them:
 * ICMP/ICMPv6 (8 bytes: the quoted packet of an error is the payload, as in core/decode/icmp.ts),
 * SCTP's common header (12), IPv6 extension headers, fragments and AH, TSO/jumbo lengths of 0,
 * GRE v0 (RFC 2784/2890) to IPv4/IPv6, and the IP-in-IP layers past the fast path's two. Each
 * header moves the payload start as core/decode's setPayload does (an IP header starts a packet
 * afresh, its payload after it; a transport header's payload after that), so the cut is
 * core/decode/frame.ts payloadOffset wherever this walk reaches as far as the reference decoder;
 * where it does not (MPLS, ERSPAN, NSH, WireGuard, a header cut short by the snaplen) it stops at
 * the payload start of the packet it is in, which holds fewer header bytes than the reference's
 * cut, never a payload byte (test/unit/retention-cut.test.ts compares both on the corpus).
 */
#include "headers.h"

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

int headers_carry_ip(uint16_t type) {
  switch (type) {
    case 0x8847: case 0x8848: /* MPLS */
    case 0x880b:              /* PPP (GREv1) */
    case 0x88be: case 0x22eb: /* ERSPAN */
    case 0x894f:              /* NSH */
    case 0x8864:              /* PPPoE session */
      return 1;
    default:
      return type <= 1500; /* LLC / SNAP */
  }
}

uint32_t headers_tail(const uint8_t *b, uint32_t caplen, uint32_t at, int proto, uint32_t pay) {
  uint64_t len = caplen;
#define HAVE(o, n) ((uint64_t)(o) + (uint64_t)(n) <= len)
#define END(x) ((uint64_t)(x) < len ? (uint32_t)(x) : (uint32_t)len)
  for (int steps = 0; steps < 16; steps++) {
    switch (proto) {
      case 0: case 43: case 60: { /* hop-by-hop, routing, destination options: (len + 1) * 8 */
        if (!HAVE(at, 2)) return END(pay);
        uint32_t hl = ((uint32_t)b[at + 1] + 1) * 8;
        if (!HAVE(at, hl)) return END(pay);
        proto = b[at];
        at += hl;
        pay = at;
        continue;
      }
      case 44: { /* fragment: only the first carries the upper-layer header */
        if (!HAVE(at, 8)) return END(pay);
        proto = b[at];
        uint16_t fo = be16(b + at + 2) & 0xfff8;
        at += 8;
        pay = at;
        if (fo != 0) return END(pay);
        continue;
      }
      case 51: { /* AH (RFC 4302 §2): (len + 2) * 4 */
        if (!HAVE(at, 8)) return END(pay);
        uint32_t hl = ((uint32_t)b[at + 1] + 2) * 4;
        if (hl < 12 || !HAVE(at, hl)) return END(pay);
        proto = b[at];
        at += hl;
        pay = at;
        continue;
      }
      case 4: { /* an IPv4 header at `at` */
        if (!HAVE(at, 20) || (b[at] >> 4) != 4) return END(pay);
        uint32_t hl = (uint32_t)(b[at] & 0x0f) * 4;
        uint32_t total = be16(b + at + 2);
        if (hl < 20 || (total != 0 && total < hl)) return END(pay);
        if (total != 0 && at + total < len) len = at + total;
        pay = at + hl;
        if (!HAVE(at, hl) || (be16(b + at + 6) & 0x1fff) != 0) return END(pay);
        proto = b[at + 9];
        at += hl;
        continue;
      }
      case 41: { /* an IPv6 header at `at` */
        if (!HAVE(at, 40) || (b[at] >> 4) != 6) return END(pay);
        uint32_t plen = be16(b + at + 4);
        if (plen != 0 && at + 40 + plen < len) len = at + 40 + plen;
        proto = b[at + 6];
        at += 40;
        pay = at;
        continue;
      }
      case 6: { /* TCP: the data offset */
        if (!HAVE(at, 20)) return END(pay);
        uint32_t thl = (uint32_t)(b[at + 12] >> 4) * 4;
        return thl < 20 ? END(pay) : END(at + thl);
      }
      case 17: /* UDP: a tunnel in it is not followed here (its payload starts after the 8) */
      case 1:
      case 58: /* ICMP, ICMPv6: type, code, checksum and 4 bytes */
        return HAVE(at, 8) ? END(at + 8) : END(pay);
      case 132: /* SCTP common header */
        return HAVE(at, 12) ? END(at + 12) : END(pay);
      case 47: { /* GRE v0 (RFC 2784, keys and sequence numbers RFC 2890) */
        if (!HAVE(at, 4)) return END(pay);
        uint16_t flags = be16(b + at), type = be16(b + at + 2);
        if ((flags & 7) != 0 || (flags & 0x4000) != 0) return END(pay); /* v1, RFC 1701 routing */
        uint32_t hl = 4 + ((flags & 0x8000) ? 4 : 0) + ((flags & 0x2000) ? 4 : 0) +
                      ((flags & 0x1000) ? 4 : 0);
        if (!HAVE(at, hl)) return END(pay);
        if (type == 0x0800) proto = 4;
        else if (type == 0x86dd) proto = 41;
        else return END(pay);
        at += hl;
        continue;
      }
      default: /* a leaf (ESP, a later fragment, a protocol the decoder does not read) */
        return END(pay);
    }
  }
  return END(pay);
#undef HAVE
#undef END
}

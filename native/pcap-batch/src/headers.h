/* headers.h — where a frame's headers end, for retention's headers-only cut (headers.c). */
#ifndef HOPTRACE_HEADERS_H
#define HOPTRACE_HEADERS_H
#include <stdint.h>

/* EtherTypes the reference decoder can follow to an IP packet (MPLS, PPP, ERSPAN, NSH): a frame
 * the fast path stops at one of them is cut where it starts, never kept whole. */
int headers_carry_ip(uint16_t type);

/* Where the headers of b[0, caplen) end when an IP payload of protocol `proto` starts at `at`
 * (-1: a leaf, nothing follows), `pay` being where the innermost packet's payload starts so far:
 * IPv6 extension headers, fragments, AH, TCP, UDP, ICMP/ICMPv6, SCTP, IPv4/IPv6 in IP and GRE v0
 * to IPv4/IPv6 are walked (at most 16 headers); anything else ends the walk at the payload start
 * of the packet it is in. At most caplen. */
uint32_t headers_tail(const uint8_t *b, uint32_t caplen, uint32_t at, int proto, uint32_t pay);
#endif

/*
 * fold.h — per-flow counters for the live capture (fold.c): which FAST summary records are sent
 * as events and which are only counted into their flow's counter record.
 */
#ifndef HOPTRACE_FOLD_H
#define HOPTRACE_FOLD_H
#include <stddef.h>
#include <stdint.h>

#include "summary.h"

/* A record's status byte: 1 FAST, 0 SLOW (summary.c), FOLD_STATUS a flow's counter record. */
#define FOLD_STATUS 2

/*
 * Counter record (status FOLD_STATUS, SUMMARY_BYTES long): the first counted packet's record —
 * its status, flags, protocols, ports (32..39), tunnels (40..51), addresses (88..151), caplen,
 * wire length and ts (16: the first counted packet's) — with the packet keys replaced by:
 *   52 u64 packets   60 u64 wire bytes   68 u64 last ts (ns)
 *   152 f64 first frame   160 f64 last frame (capture frame numbers, 1-based)
 * Keys a counter cannot have (seq, hashes, marker) are zero, flags SF_TCP/TSOPT/PAYLOAD/IPID/
 * MARKER cleared. A counter's frames are the packets it counts, not a range: packets sent whole
 * between its first and last frame (a reopened flow) are events of their own, never in it.
 */
#define FOLD_R_PACKETS 52
#define FOLD_R_BYTES 60
#define FOLD_R_LAST_TS 68
#define FOLD_R_FIRST_FRAME 152
#define FOLD_R_LAST_FRAME 160

#define FOLD_KEY 96

typedef struct {
  uint32_t budget;     /* packets still sent whole in this direction */
  double packets;      /* counted, not yet in a counter record */
  double bytes;
  uint64_t last_ts;
  double first_frame, last_frame;
  uint8_t rec[SUMMARY_BYTES]; /* the first counted packet's record (packets > 0) */
} FoldDir;

typedef struct {
  uint8_t used;
  /* The key's shape is fold_quick's (no tunnel, IPv4, TCP or UDP with ports): its endpoints in
   * the key's order, to match a frame by its addresses and ports alone. */
  uint8_t quick, qproto;
  uint16_t qpa, qpb;
  uint32_t qa, qb;
  uint32_t hash;
  uint64_t last_ts;    /* the flow's last packet, either direction */
  uint8_t key[FOLD_KEY]; /* direction 0's identity (fold.c key_of) */
  FoldDir dir[2];
} FoldFlow;

typedef struct {
  FoldFlow *slots; /* NULL: folding off, every record is sent */
  uint32_t mask;
  uint32_t first;        /* packets sent whole per direction after the flow appears or reopens */
  uint64_t reopen_ns;    /* a gap this long in a flow reopens it */
  uint64_t expire_ns;    /* a flow idle this long gives up its slot (once it holds no counts) */
  uint32_t cursor;       /* fold_flush's place */
  double pending;        /* directions holding counts */
  double held;           /* packets counted and not yet in a counter record */
  /* Counters (stats): */
  double folded;         /* packets counted into counter records (emitted or pending) */
  double full_sent;      /* FAST packets sent whole because no slot was free */
  double quick;          /* packets fold_quick counted (without a record), of `folded` */
  double flows;          /* slots in use */
} FoldTable;

/* Defaults: the capture's foldFirst / foldSlots options. */
#define FOLD_DEFAULT_FIRST 32
#define FOLD_DEFAULT_SLOTS 4096
#define FOLD_PROBES 16
#define FOLD_REOPEN_NS 200000000ull   /* 200 ms */
#define FOLD_EXPIRE_NS 10000000000ull /* 10 s */

/* Starts a table of `slots` (a power of two, 16..1<<20) sending `first` packets whole per
 * direction; returns 0, or -1 when out of memory (t is then off). first 0: off. */
int fold_open(FoldTable *t, uint32_t slots, uint32_t first);
void fold_close(FoldTable *t);
static inline int fold_on(const FoldTable *t) { return t->slots != NULL; }

/*
 * Decides one summarized frame: 1 = send its record, 0 = counted (the caller drops the record).
 * rec: summary_one's record; b/caplen the frame, payload_off where its innermost transport header
 * ends (summary_one's headers_end); frame its capture frame number. Sent whole: SLOW records, a
 * flow's first `first` packets each way, the `first` packets each way after any packet that may
 * start or end an exchange (a TCP SYN, FIN or RST, a probe marker, a payload that begins like a
 * request: an HTTP method, a TLS ClientHello) or after a gap of reopen_ns, and every packet
 * of a flow that finds no free slot (counted in full_sent).
 */
int fold_packet(FoldTable *t, const uint8_t *rec, const uint8_t *b, uint32_t caplen,
                uint32_t payload_off, double frame);

/*
 * fold_packet for a frame summary_quick took (q), without its record: 1 when the frame was counted
 * into its flow — the decision fold_packet would make, and the same counts — 0 when it must go the
 * whole way (summary_one, then fold_packet): its flow is not in the table, the packet may start or
 * end an exchange, its direction still sends whole or holds no counts yet, or the flow reopens.
 */
int fold_quick(FoldTable *t, const uint8_t *b, uint32_t caplen, uint32_t wirelen, uint64_t ts,
               double frame, const SummaryQuick *q);

/* Writes up to max counter records for the directions holding counts into out; returns how many.
 * Call again while fold_pending(t): it goes on where it stopped. */
size_t fold_flush(FoldTable *t, uint8_t *out, size_t max);
static inline int fold_pending(const FoldTable *t) { return t->pending > 0; }
/* Packets the records recs[0..n) stand for (a batch): one each, a counter record what it counts. */
double fold_batch_packets(const uint8_t *recs, size_t n);
#endif

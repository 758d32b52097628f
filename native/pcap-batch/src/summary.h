/* summary.h — the C fast path of the decoder (summary.c): frames → fixed-size summary records. */
#ifndef HOPTRACE_SUMMARY_H
#define HOPTRACE_SUMMARY_H
#include <stddef.h>
#include <stdint.h>

#define SUMMARY_BYTES 192

/* Source layouts summary_run walks. */
#define SUMMARY_LAYOUT_BATCH 0      /* capture batch: u32 caplen | u32 wirelen | u64 ts_ns | data, pad 8 */
#define SUMMARY_LAYOUT_PCAP_LE_US 1 /* classic pcap records: u32 sec | u32 frac | u32 incl | u32 orig | data */
#define SUMMARY_LAYOUT_PCAP_LE_NS 2
#define SUMMARY_LAYOUT_PCAP_BE_US 3
#define SUMMARY_LAYOUT_PCAP_BE_NS 4
#define SUMMARY_LAYOUT_PCAPNG_LE 5  /* pcapng Enhanced Packet Blocks (summary_run_ng) */
#define SUMMARY_LAYOUT_PCAPNG_BE 6

/* UDP port table values (one byte per port). */
#define SUMMARY_PORT_NONE 0
#define SUMMARY_PORT_VXLAN 1
#define SUMMARY_PORT_GENEVE 2
#define SUMMARY_PORT_OTHER 3 /* a tunnel the reference decoder handles: slow path */

/* Why summary_run stopped. */
#define SUMMARY_STOP_END 0  /* no further complete record in src */
#define SUMMARY_STOP_FULL 1 /* max_records written */
#define SUMMARY_STOP_BAD 2  /* the record at *next_pos is malformed (caplen too large / past the end) */
#define SUMMARY_STOP_BLOCK 3 /* pcapng: the block at *next_pos is not one summary_run_ng takes */

#define SUMMARY_STOP_GATE 4  /* a gate's SUMMARY_GATE_SYN: stopped after a record that may change it */

/*
 * A gate for summary_run / summary_run_ng: which FAST frames get a record (offline analysis; the
 * caller tells which frames a pass can use). A FAST frame without one is only counted — in
 * skipped_useful when its inner transport is TCP or UDP, what the caller counts as a useful event —
 * and, with SUMMARY_GATE_SEEN, a TCP frame's ports are marked in `seen`. A SLOW frame always gets
 * one: only the reference decoder can tell what it is. frame_of[i] is record i's frame, counted
 * from the run's first frame; `frames` the frames the run walked.
 */
#define SUMMARY_GATE_WINDOW 1 /* only frames with lo <= ts <= hi (ns) */
#define SUMMARY_GATE_PROTO 2  /* only frames whose inner IP protocol is `proto` */
#define SUMMARY_GATE_PORTS 4  /* only frames whose inner ports (sport | dport << 16) are in ports[] */
#define SUMMARY_GATE_SYN 8    /* a TCP SYN without ACK always gets one; the run stops after it and
                               * after a SLOW frame, unless SUMMARY_GATE_BEST and ts >= best_ts */
#define SUMMARY_GATE_BEST 16
#define SUMMARY_GATE_SEEN 32  /* seen: a 2^20-bit map of TCP port pairs (see gate_slot) */
/* quiet: a later point's data segments that its selection would pass over (record-scans.ts
 * LaterScan.block) get no record: payload, no probe marker, none of the keys (seq, ack, payload
 * or request-line hash), and a flow-hash bucket (hash & 0x3fff) empty in `hot` — the selection's
 * own map — and not taken by a record this run gave out. Applied only with SUMMARY_GATE_QUIET_ON
 * (the selection says it may pass data over: LaterPointSelection.ignoresAnyData); the run then
 * stops after a SLOW frame, whose offer may change that. */
#define SUMMARY_GATE_QUIET 64
#define SUMMARY_GATE_QUIET_ON 128
/* Tests: the quiet test decided on every frame's record, never on its bytes alone (quiet_quick
 * in summary.c; the reference it is checked against). */
#define SUMMARY_GATE_NO_QUICK 256
#define SUMMARY_GATE_MAX_PORTS 8
#define SUMMARY_GATE_HOT_BUCKETS 16384
#define SUMMARY_GATE_MAX_KEYS 1024
typedef struct {
  uint32_t flags, proto;
  uint64_t lo, hi, best_ts;
  uint32_t n_ports;
  uint32_t ports[SUMMARY_GATE_MAX_PORTS];
  uint32_t *seen;
  /* quiet: the selection's bucket counts, and the keys: n_seq, then n_ack, then n_data sorted u32 */
  const uint32_t *hot, *keys;
  uint32_t n_seq, n_ack, n_data;
  uint32_t *frame_of; /* room for max_records */
  uint32_t frames, skipped_useful;
  /* The earliest and latest time (ns) of the frames the run walked (UINT64_MAX and 0 when none):
   * the span a capture file covers, so an analysis never reads "not seen" into a time it holds no
   * frame near. */
  uint64_t ts_min, ts_max;
} SummaryGate;

/* Summarizes one frame into rec; returns 1 (FAST) or 0 (SLOW: rec holds only caplen, wire
 * length, ts and raw_offset, where the caller stores the frame's bytes). headers_end (NULL: not
 * wanted) receives where the frame's headers end — its innermost transport header's end, as
 * core/decode payloadOffset, or less where a SLOW frame's walk stops short (headers.c); the
 * captured length for a frame that carries no IP (ARP), at most caplen: retention's
 * headers-only cut. */
int summary_one(const uint8_t *b, uint32_t caplen, uint32_t wirelen, uint64_t ts,
                uint32_t linktype, const uint8_t *ports, uint8_t *rec, uint32_t raw_offset,
                uint32_t *headers_end);
/* summary_one with the payload and request-line hashes (80, 84) left zero when !hashes (the
 * PF_HASHES flag still says whether there are any): the capture callback decides first whether
 * the record is sent (fold.c), then summary_hashes completes it — the record is then byte for
 * byte summary_one's. headers_end must not be NULL when !hashes. */
int summary_one_ex(const uint8_t *b, uint32_t caplen, uint32_t wirelen, uint64_t ts,
                   uint32_t linktype, const uint8_t *ports, uint8_t *rec, uint32_t raw_offset,
                   uint32_t *headers_end, int hashes);
/* Writes the hashes summary_one_ex left out; headers_end as it returned. A no-op for a SLOW
 * record or one without captured payload. */
void summary_hashes(const uint8_t *b, uint32_t caplen, uint32_t headers_end, uint8_t *rec);
/* The headers_end of summary_one alone (for frames that are not summarized: batch mode). */
uint32_t summary_headers_end(const uint8_t *b, uint32_t caplen, uint32_t linktype,
                             const uint8_t *ports);

/* What fold.c needs of a frame of the commonest shape to count it without a record
 * (summary_quick). */
typedef struct {
  uint32_t hash;         /* the record's flow hash (offset 28) */
  uint32_t src, dst;     /* the IPv4 addresses, as the frame holds them */
  uint16_t sport, dport; /* host order */
  uint8_t proto;         /* 6 or 17 */
  uint8_t tcp_flags;     /* 0 for UDP */
  uint8_t marker;        /* the payload holds "hoptrace-probe-" where the marker is searched */
  uint32_t headers_end;  /* summary_one's headers_end */
} SummaryQuick;
/* 1 when b is Ethernet / IPv4 without options / TCP, or UDP on no tunnel port, not a later
 * fragment — a frame summary_one takes as FAST — with *q filled; 0 for any other frame. */
int summary_quick(const uint8_t *b, uint32_t caplen, uint32_t lt, const uint8_t *ports,
                  SummaryQuick *q);

/* Records a run walked whose header no writer gives, read as given (as libpcap reads them;
 * tcpdump flags them) and counted: `times`, a classic pcap record's fraction of a second of 10^6
 * (µs) or 10^9 (ns) or more (a pcapng block has no such field: always 0 there); `lengths`, a
 * classic pcap record or pcapng Enhanced Packet Block whose captured length is above its original
 * length. offline/pcap-file.ts counts the same records (CaptureFileStats.invalid). */
typedef struct {
  uint32_t times;
  uint32_t lengths;
} SummaryFlaws;

/* Summarizes records of src from pos; returns the number written to out. */
size_t summary_run(const uint8_t *src, size_t src_len, size_t pos, int layout, uint32_t linktype,
                   uint32_t max_caplen, const uint8_t *ports, uint8_t *out, size_t max_records,
                   size_t *next_pos, int *stop);
/* summary_run with a gate (NULL: every frame gets a record, as summary_run); flaws (NULL: not
 * counted) receives the classic pcap records walked with an invalid time or lengths. */
size_t summary_run_gate(const uint8_t *src, size_t src_len, size_t pos, int layout,
                        uint32_t linktype, uint32_t max_caplen, const uint8_t *ports, uint8_t *out,
                        size_t max_records, size_t *next_pos, int *stop, SummaryGate *gate,
                        SummaryFlaws *flaws);
/* pcapng interface table entries for summary_run_ng (LE): u32 link type | u32 mul | u32 div |
 * u8 carried, 3 bytes zero | i64 if_tsoffset (seconds); div 0 = the interface's packets are left to
 * the caller. summary_run_ng sets `carried` to 1 once it walks a packet of the interface (gated out
 * or not), so the caller knows which interfaces carried packets (drop counts: pcap-file.ts). */
#define SUMMARY_NG_IFACE_BYTES 24

/* Summarizes the pcapng Enhanced Packet Blocks from pos (a section in byte order `le`) of the
 * interfaces in the table (n_ifaces entries), timestamps in ns = units * mul / div + if_tsoffset
 * * 10^9, each record's interface id at offset 188; stops at any other block, a block not wholly
 * in src, a block of an interface the table leaves out, or one that is not well formed or whose
 * time is not in [0, 2^64) ns — the caller's reader handles that block (and refuses a time its
 * offset put out of range). Returns the number written to out. */
size_t summary_run_ng(const uint8_t *src, size_t src_len, size_t pos, int le, uint32_t max_block,
                      uint8_t *ifaces, uint32_t n_ifaces, const uint8_t *ports, uint8_t *out,
                      size_t max_records, size_t *next_pos, int *stop);
/* summary_run_ng with a gate (NULL: every frame gets a record, as summary_run_ng); flaws (NULL:
 * not counted) receives the blocks walked whose captured length is above the original length. */
size_t summary_run_ng_gate(const uint8_t *src, size_t src_len, size_t pos, int le,
                           uint32_t max_block, uint8_t *ifaces, uint32_t n_ifaces,
                           const uint8_t *ports, uint8_t *out, size_t max_records,
                           size_t *next_pos, int *stop, SummaryGate *gate, SummaryFlaws *flaws);
/* Most bytes summary_wire writes besides the context (two IPv6 tuples, two tunnels, all keys). */
#define SUMMARY_WIRE_MAX 512

/* Writes the FAST record rec as one EventBatch `events` entry (summary_wire.c) to out: ctx is
 * fields 1-3 already encoded, the tables map a record's transport / tunnel kind index to its
 * wire enum value. Returns the bytes written (at most ctx_len + SUMMARY_WIRE_MAX). */
size_t summary_wire(const uint8_t *rec, const uint8_t *ctx, size_t ctx_len,
                    uint32_t linktype_value, uint64_t frame, const uint8_t *transport_wire,
                    const uint8_t *tunnel_wire, uint8_t *out);
#endif

/*
 * retain: the capture's frames kept as a classic pcap file for evidence (see retain.c).
 */
#ifndef HOPTRACE_RETAIN_H
#define HOPTRACE_RETAIN_H

#include <pcap/pcap.h>
#include <stdint.h>

/* Where retention stands. Once it leaves RETAIN_ON it never comes back, so the file holds frames
 * 1..kept+skipped and nothing after: frame N of the capture is record N of the file, where a gap
 * record (RETAIN_GAP_SEC) stands for as many frames as it says. */
enum { RETAIN_OFF = 0, RETAIN_ON = 1, RETAIN_FULL = 2, RETAIN_FAILED = 3 };

typedef struct {
  int state;
  int fd;            /* our dup of the caller's fd; -1 once closed */
  uint8_t *buf;      /* RETAIN_BUFFER bytes, written out when full */
  size_t used;
  uint32_t snaplen;  /* bytes kept of each frame at most */
  int payload;       /* keep frames whole (to snaplen); else only up to their headers' end */
  uint64_t max;      /* the file's bound in bytes, header included */
  uint64_t bytes;    /* bytes accepted (header + records), written or buffered */
  double kept;       /* frames accepted */
  double skipped;    /* frames covered by gap records: counted per flow, not kept (retain_skip) */
  uint32_t gap;      /* frames skipped since the last record, not yet written as a gap record */
  double dropped;    /* frames numbered after retention left RETAIN_ON */
  int err;           /* errno of the failure (RETAIN_FAILED) */
} Retain;

/* Starts retention into fd (dup'ed; the caller keeps its own): a pcap header for `linktype` (a
 * LINKTYPE_* value), snaplen and ns (nano != 0) or µs timestamps. Returns 0, or an errno: r is
 * then RETAIN_FAILED and counts every frame as dropped. */
int retain_open(Retain *r, int fd, uint32_t linktype, uint32_t snaplen, uint64_t max_bytes,
                int nano, int payload);
/* Whether retain_frame wants the frame's headers_end (headers only, and still retaining). */
static inline int retain_wants_cut(const Retain *r) { return r->state == RETAIN_ON && !r->payload; }
/* Keeps one frame (its first snaplen bytes; headers only: its first headers_end bytes, which the
 * caller computes only when retain_wants_cut), or counts it as dropped. The record's orig_len is
 * the wire length either way, so a reader sees the cut. Buffered: a write(2) to the file (page
 * cache) only every 256 KiB. Does nothing but count when r was never opened. */
void retain_frame(Retain *r, const struct pcap_pkthdr *h, const uint8_t *bytes,
                  uint32_t headers_end);
/*
 * A frame whose bytes are not kept because its packet was counted into its flow's counter (fold.c):
 * runs of them become one gap record — incl_len 0, orig_len 0, ts_sec RETAIN_GAP_SEC, ts_frac the
 * number of frames — written before the next kept frame (or at close), 16 bytes however long the
 * run. Counted as dropped once retention left RETAIN_ON, like any later frame.
 */
#define RETAIN_GAP_SEC 0xffffffffu
void retain_skip(Retain *r);
/* Writes what is buffered and closes the file (the state stays: ON means every frame was kept,
 * unless this last write fails). Idempotent. */
void retain_close(Retain *r);
/* "off", "on", "full" or "failed". */
const char *retain_state_name(const Retain *r);

#endif

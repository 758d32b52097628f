/*
 * retain: every frame the capture numbers is appended, cut to a retention snaplen, to a classic
 * pcap file the agent gave the worker as an fd (agent/capture/retention-store.ts), so that the
 * collector can ask for the real bytes of the matched connection once its verdict is known.
 *
 * Headers only unless the capture asked for the payload (retainPayload, the collector's
 * evidencePayload): each frame is then cut where its headers end — the end of its innermost
 * transport header, which the summarizer finds on its way (summary_one's headers_end; for frames
 * it leaves SLOW a bounded walk, headers.c, that stops short rather than keep a payload byte) —
 * so no request line, cookie or Authorization header stays on the node unasked. The record's
 * orig_len stays the wire length: a reader sees the cut.
 *
 * The file is libpcap's classic format (draft-ietf-opsawg-pcap: 24-byte header, then a 16-byte
 * header per record; host byte order, ns or µs magic like the capture), written here rather than
 * with pcap_dump: its two stdio fwrite calls per frame, each taking the FILE lock, cost ~180 ns a
 * frame where copying into our own buffer costs ~60 (measured, 106-byte frames, write(2) included).
 * The capture callback pays a copy per frame and a write(2) to the page cache every 256 KiB, never
 * an fsync. The file is bounded: the first frame that does not fit stops retention for good
 * (RETAIN_FULL) and it and every later frame are counted as dropped; a failed write (ENOSPC, EIO)
 * does the same (RETAIN_FAILED). So the file holds frames 1..kept, each as record N = frame N,
 * which is how the agent finds them.
 */
#include "retain.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RETAIN_BUFFER (256 * 1024)
#define PCAP_HEADER 24
#define RECORD_HEADER 16
#define MAGIC_US 0xa1b2c3d4u
#define MAGIC_NS 0xa1b23c4du

static void put32(uint8_t *o, uint32_t v) { memcpy(o, &v, 4); /* host order, as libpcap writes */ }

static void fail(Retain *r, int err) {
  r->state = RETAIN_FAILED;
  r->err = err != 0 ? err : EIO;
}

/* Writes the buffer out; 0, or -1 with retention failed. */
static int flush(Retain *r) {
  size_t off = 0;
  while (off < r->used) {
    ssize_t n = write(r->fd, r->buf + off, r->used - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fail(r, n < 0 ? errno : EIO);
      r->used = 0;
      return -1;
    }
    off += (size_t)n;
  }
  r->used = 0;
  return 0;
}

int retain_open(Retain *r, int fd, uint32_t linktype, uint32_t snaplen, uint64_t max_bytes,
                int nano, int payload) {
  r->state = RETAIN_FAILED;
  r->fd = -1;
  r->snaplen = snaplen;
  r->payload = payload;
  r->max = max_bytes;
  r->bytes = PCAP_HEADER;
  r->buf = malloc(RETAIN_BUFFER > RECORD_HEADER + snaplen ? RETAIN_BUFFER : RECORD_HEADER + snaplen);
  if (r->buf == NULL) {
    r->err = ENOMEM;
    return r->err;
  }
  r->fd = dup(fd);
  if (r->fd < 0) {
    r->err = errno;
    free(r->buf);
    r->buf = NULL;
    return r->err;
  }
  uint8_t *h = r->buf;
  put32(h, nano ? MAGIC_NS : MAGIC_US);
  uint16_t major = 2, minor = 4;
  memcpy(h + 4, &major, 2);
  memcpy(h + 6, &minor, 2);
  put32(h + 8, 0);  /* thiszone */
  put32(h + 12, 0); /* sigfigs */
  put32(h + 16, snaplen);
  put32(h + 20, linktype);
  r->used = PCAP_HEADER;
  r->state = RETAIN_ON;
  r->err = 0;
  return 0;
}

/* Writes the pending gap record; 0, or -1 when retention stopped (the gap's frames dropped). */
static int write_gap(Retain *r) {
  if (r->gap == 0) return 0;
  if (r->bytes + RECORD_HEADER > r->max) {
    r->state = RETAIN_FULL;
    r->dropped += r->gap;
    r->gap = 0;
    (void)flush(r);
    return -1;
  }
  if (r->used + RECORD_HEADER > RETAIN_BUFFER && flush(r) != 0) {
    r->dropped += r->gap;
    r->gap = 0;
    return -1;
  }
  uint8_t *o = r->buf + r->used;
  put32(o, RETAIN_GAP_SEC);
  put32(o + 4, r->gap);
  put32(o + 8, 0);
  put32(o + 12, 0);
  r->used += RECORD_HEADER;
  r->bytes += RECORD_HEADER;
  r->skipped += r->gap;
  r->gap = 0;
  return 0;
}

void retain_skip(Retain *r) {
  if (r->state != RETAIN_ON) {
    if (r->state != RETAIN_OFF) r->dropped += 1;
    return;
  }
  if (r->gap == 0xffffffffu && write_gap(r) != 0) {
    r->dropped += 1;
    return;
  }
  r->gap++;
}

void retain_frame(Retain *r, const struct pcap_pkthdr *h, const uint8_t *bytes,
                  uint32_t headers_end) {
  if (r->state == RETAIN_ON && r->gap > 0) (void)write_gap(r);
  if (r->state != RETAIN_ON) {
    if (r->state != RETAIN_OFF) r->dropped += 1;
    return;
  }
  uint32_t cut = h->caplen < r->snaplen ? h->caplen : r->snaplen;
  if (!r->payload && headers_end < cut) cut = headers_end;
  if (r->bytes + RECORD_HEADER + cut > r->max) {
    r->state = RETAIN_FULL;
    r->dropped += 1;
    /* Written out now: the file is complete whatever happens to the worker later. */
    (void)flush(r);
    return;
  }
  if (r->used + RECORD_HEADER + cut > RETAIN_BUFFER && flush(r) != 0) {
    r->dropped += 1;
    return;
  }
  uint8_t *o = r->buf + r->used;
  put32(o, (uint32_t)h->ts.tv_sec);
  put32(o + 4, (uint32_t)h->ts.tv_usec); /* ns with a nano-precision capture */
  put32(o + 8, cut);
  put32(o + 12, h->len);
  memcpy(o + RECORD_HEADER, bytes, cut);
  r->used += RECORD_HEADER + cut;
  r->bytes += RECORD_HEADER + cut;
  r->kept += 1;
}

void retain_close(Retain *r) {
  if (r->state == RETAIN_OFF) return; /* never opened: fd is not ours (a zeroed struct) */
  if (r->fd >= 0) {
    if (r->state == RETAIN_ON) (void)write_gap(r);
    if (r->used > 0) (void)flush(r);
    close(r->fd);
    r->fd = -1;
  }
  free(r->buf);
  r->buf = NULL;
}

const char *retain_state_name(const Retain *r) {
  switch (r->state) {
    case RETAIN_ON:
      return "on";
    case RETAIN_FULL:
      return "full";
    case RETAIN_FAILED:
      return "failed";
    default:
      return "off";
  }
}

/*
 * pcap_batch: live capture with the system libpcap, delivered to JS in batches.
 *
 *   const h = new Capture({ iface, filter, snaplen, bufferBytes, timeoutMs, immediate, promisc,
 *                           tstampPrecision, batchBytes }, onBatch, onError);
 *   onBatch(buf, count, bytes)   buf is ONE reused Buffer holding `count` records:
 *                                  u32 caplen | u32 wirelen | u64 ts_ns | caplen bytes, pad to 8
 *                                (little-endian); valid only during the call.
 *   Summary mode with direct output (options.summaryPorts = a 65536-byte UDP port table, see
 *   summary.c; options.frameOut = a FrameWriter; options.frameContext = the EventContext as JSON):
 *   every packet is decoded in the callback by the C fast path into a 192-byte summary record (the
 *   bytes of SLOW frames are kept beside the records), and each batch is written by C through the
 *   writer as one type-4 frame (agent/capture/worker-frames.ts). onBatch is never called: no
 *   JavaScript per batch. A batch holds up to batchBytes / 192 records whatever the snaplen; the
 *   SLOW frames' bytes go to an area of a quarter of batchBytes (at least 16 snaplen frames), and
 *   a batch goes out early when the next frame might not fit there.
 *   onError(code, message)      the capture failed (e.g. 'IFACE_GONE'); delivery has stopped.
 *                                IFACE_GONE comes after what the ring still held was delivered:
 *                                read at once, and again after the block timeout (begin_gone).
 *   h.stats() -> { recv, drop, ifdrop, delivered, held, outDrops, pollWakeups, timerWakeups,
 *                  busy }        pcap_stats (after close: the values
 *                                read at close, after the last delivery) and the packets handed
 *                                on (to onBatch or the FrameWriter; with coalesceMs, also those
 *                                held for the next frame, written at the latest by close()); after
 *                                close, recv - drop - delivered = packets left in the ring.
 *                                held: of delivered, the records waiting in the batch for the
 *                                next frame (coalesceMs; 0 once close() wrote them).
 *                                outDrops: packets of the batches the FrameWriter dropped (its
 *                                queue or ring full; they are counted in delivered too).
 *   options.coalesceMs (direct output only, 0 = off): records of several wake-ups go out as one
 *                                frame, at most coalesceMs after the previous frame (a timer
 *                                writes what is left); drain() and close() write it at once.
 *   options.busyPollMs (direct output only, 0 = off): when ring blocks retire less than busyPollMs
 *                                apart, stop waiting on the socket and read the ring every
 *                                busyPollMs on a timer instead, until a tick finds it empty
 *                                (NAPI's interrupt mitigation, in user space). TPACKET_V3 blocks
 *                                are 256 KiB (libpcap), so a busy link wakes the poll hundreds of
 *                                times a second, and each wake-up costs more than the packets of
 *                                a block share of it. Only while the ring (bufferBytes) holds
 *                                four periods of the traffic: a tick that finds it more than a
 *                                quarter full goes back to the socket.
 *                                stats().pollWakeups / timerWakeups count both kinds of wake-up,
 *                                stats().busy says which mode reads now.
 *   options.retainFd (-1 = off), retainSnaplen (256), retainMaxBytes (64 MiB): every frame the
 *                                capture numbers (delivered, or in a batch the writer dropped) is
 *                                also written, cut to retainSnaplen (at most the snaplen), to a
 *                                classic pcap file on that fd (retain.c): record N = frame N.
 *                                Headers only — each frame cut where its innermost transport
 *                                header ends (summary_one's headers_end) — unless
 *                                options.retainPayload; batch mode cuts with options.retainPorts
 *                                (a 65536-byte UDP port table; else the default ports). Past
 *                                retainMaxBytes, or after a failed write, retention stops for good
 *                                and later frames are counted. stats() adds retained,
 *                                retainDropped, retainBytes, retainSnaplen, retainState
 *                                ("off" | "on" | "full" | "failed") and retainError (strerror).
 *   h.drain(rounds?) -> n        delivers what the ring holds now (retired blocks), no waiting.
 *   h.close()                   idempotent; safe inside onBatch.
 *   h.linktype / h.linktypeName / h.snaplen / h.tstampPrecision
 *
 * Why this shape: the capture runs in the Node event loop (a uv_poll on pcap's selectable fd,
 * pcap_setnonblock), no thread. With immediate mode off, Linux TPACKET_V3 wakes us once per
 * retired ring block (full, or after timeoutMs), not per packet; every wake-up drains the ring
 * with pcap_dispatch into one buffer and makes one JS call per buffer. When JS is slow the ring
 * fills and the kernel drops and counts (ps_drop): nothing queues up in user space unseen.
 *
 *   wireRun(recs, i, end, ctx, linktypeValue, frame, tables, out, pos) -> [nextI, nextPos]
 *                                FAST summary records → protobuf event entries (summary_wire.c)
 *   const w = new FrameWriter(fd, maxQueuedBytes, ringFd?)   the capture worker's one frame
 *                                writer on fd; with ringFd (a SharedRing's fd the parent passed
 *                                down) droppable frames go through that ring, notices through fd
 *   w.write(buf, droppable) -> bool   false: dropped (queue or ring full) or the writer failed
 *   w.pending() / w.error() / w.close()   see frame_out.c
 *   const r = new SharedRing(bytes)   the parent's end of a frame ring (frame_ring.c): r.fd (the
 *                                memfd, to hand to the worker), r.buffer (a Buffer over the data
 *                                area), r.release(end) (bytes before `end` are read), r.close()
 *                                (closes r.fd; the mapping lives as long as r.buffer),
 *                                r.dispose() (unmaps now; r.buffer and its views become empty)
 *
 * open() throws an Error whose .code is one of NO_SUCH_DEVICE, PERM_DENIED, BAD_FILTER,
 * ACTIVATE, BAD_ARGUMENT; the message is libpcap's.
 */
#define NAPI_VERSION 8
#include <errno.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <node_api.h>
#include <pcap/pcap.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "frame_out.h"
#include "frame_ring.h"
#include "fold.h"
#include "retain.h"
#include "summary.h"

#define ADDON_VERSION 17
#define REC_HDR 16
#define ALIGN8(n) (((size_t)(n) + 7u) & ~(size_t)7u)
/* Batches per wake-up before yielding to the event loop (the fd stays readable: level-triggered,
 * so libuv calls us again on its next iteration). Kept small: with 64 rounds one wake-up could
 * run ~127 k packets of JS (seconds) without returning to the loop, so timers, stdout writes,
 * signals and the consumer's batcher all stalled and the worker delivered in bursts seconds apart. */
#define MAX_ROUNDS 2

typedef struct {
  napi_env env;
  pcap_t *p;
  uv_poll_t *poll; /* freed in its close callback */
  napi_ref self;   /* strong while open: an open capture is not garbage */
  napi_ref on_batch;
  napi_ref on_error;
  napi_ref buf_ref;
  napi_async_context async;
  uint8_t *buf;
  size_t buf_len;
  size_t used;
  uint32_t count;
  int max_per_batch;
  int nano;
  int in_js;         /* inside onBatch: close() is deferred */
  int close_pending;
  int closed;
  int failed;
  char iface[IFNAMSIZ + 1];
  struct pcap_stat last; /* stats at close */
  int have_last;
  double handed; /* packets handed to onBatch since open */
  /* Summary mode (options.summaryPorts, always with direct output): summary records (summary.c)
   * in buf, the bytes of the frames the fast path left to the reference decoder in raw. */
  int summary;
  uint32_t linktype;
  napi_ref ports_ref;
  const uint8_t *ports;
  uint8_t *raw; /* malloc'd: only C reads it */
  size_t raw_len;
  size_t raw_used;
  /* Direct output (options.frameOut, required by summary mode): each batch is written by C as
   * one type-4 frame through the FrameWriter, and onBatch is never called. */
  struct FrameWriter *out;
  napi_ref out_ref;
  uint8_t *fhead; /* the frame's header template: length, type, body header, context, padding */
  size_t fhead_len;
  double out_drops; /* packets in batches the writer dropped (its queue over the bound) */
  /* Coalescing (options.coalesceMs, direct output only): at high rates a ring block retires every
   * few ms; records from several wake-ups go out as one frame, at most coalesce_ns after the
   * previous one, so the worker wakes the agent (a cross-CPU wake-up each) less often. */
  uint64_t coalesce_ns;
  uint64_t last_out_ns; /* uv_hrtime() of the last frame written */
  uv_timer_t *flush_timer; /* freed in its close callback */
  /* Busy polling (options.busyPollMs, direct output only): see the header comment. */
  uv_timer_t *busy_timer; /* freed in its close callback */
  uint64_t busy_ms;
  uint64_t last_wake_ns; /* uv_hrtime() of the last poll wake-up */
  int busy;              /* reading on busy_timer, the poll stopped */
  double ring_bytes;     /* the kernel ring's size (bufferBytes) */
  double read_bytes;     /* ring bytes read since open, roughly: caplen + 64 per packet */
  int drained;           /* the last dispatch_rounds emptied the ring */
  double poll_wakeups;
  double timer_wakeups;
  /* The interface went away (begin_gone): the ring is read once more after the block timeout,
   * then IFACE_GONE is reported with gone_msg. */
  int going;
  uint64_t timeout_ms;   /* the TPACKET_V3 block timeout asked of libpcap */
  uv_timer_t *gone_timer; /* freed in its close callback */
  char gone_msg[256];
  /* Retention (options.retainFd): every numbered frame, cut to retainSnaplen, into a pcap file
   * (retain.c), in step with `handed`: frame N is record N. */
  Retain retain;
  /* Batch mode's UDP port table for the headers-only cut (options.retainPorts, else VXLAN 4789
   * and 8472, Geneve 6081); summary mode cuts with `ports`. */
  napi_ref retain_ports_ref;
  const uint8_t *retain_ports;
  /* Per-flow counters (options.foldFirst, summary mode only; fold.c): records of counted packets
   * are not kept, their flows' counter records go out with each batch. Records then skip frame
   * numbers, so each carries its frame's offset from batch_first (record byte 188). */
  FoldTable fold;
  double batch_first; /* the frame number of the batch's first packet record */
} Capture;

/* The JS FrameWriter: the worker's frame writer (frame_out.c); o is NULL once closed. */
typedef struct FrameWriter {
  FrameOut *o;
} FrameWriter;

static const napi_type_tag FRAME_WRITER_TAG = {0x686f70747261636bULL, 0x6672616d656f7574ULL};

/* The JS SharedRing: the parent's end of a frame ring. The mapping belongs to `buffer` (unmapped
 * when that Buffer is collected); the ring object holds the Buffer strongly, so release() always
 * writes to mapped memory. */
typedef struct SharedRing {
  FrameRing *r; /* NULL once disposed (the Buffer's finalizer frees it) */
  int fd;       /* -1 once closed */
  napi_ref buf_ref;
  int64_t ext; /* bytes reported to V8 as external memory, until disposed or collected */
} SharedRing;

static const napi_type_tag SHARED_RING_TAG = {0x686f70747261636bULL, 0x7368617265647267ULL};

#define CHECK(call)                                                                             \
  do {                                                                                          \
    if ((call) != napi_ok) return NULL;                                                          \
  } while (0)

static void put_u32(uint8_t *o, uint32_t v) {
  o[0] = (uint8_t)v;
  o[1] = (uint8_t)(v >> 8);
  o[2] = (uint8_t)(v >> 16);
  o[3] = (uint8_t)(v >> 24);
}

static void put_u64(uint8_t *o, uint64_t v) {
  put_u32(o, (uint32_t)v);
  put_u32(o + 4, (uint32_t)(v >> 32));
}

/* pcap_datalink() gives DLT_*; the decoder takes LINKTYPE_* (pcap file values). They differ only
 * for a few historical DLTs; DLT_RAW (12, 14 on OpenBSD) is the one Linux tun devices report. */
static int dlt_to_linktype(int dlt) {
  if (dlt == DLT_RAW || dlt == 12 || dlt == 14) return 101;
  if (dlt == DLT_ATM_RFC1483) return 100;
  return dlt;
}

static void out_batch(Capture *c);

/* The decoder's default UDP tunnel ports (core/decode/tables.ts DEFAULTS: VXLAN 4789 and 8472,
 * Geneve 6081; the others are left to the reference, SUMMARY_PORT_OTHER): batch mode's table for
 * the headers-only cut when the caller gives none. Built once (the event loop's thread). */
static const uint8_t *default_udp_ports(void) {
  static uint8_t t[65536];
  static int built;
  if (!built) {
    t[4789] = t[8472] = SUMMARY_PORT_VXLAN;
    t[6081] = SUMMARY_PORT_GENEVE;
    t[51820] = t[4790] = t[6635] = t[4500] = SUMMARY_PORT_OTHER;
    built = 1;
  }
  return t;
}

static void on_packet(u_char *user, const struct pcap_pkthdr *h, const u_char *bytes) {
  Capture *c = (Capture *)user;
  uint32_t caplen = h->caplen;
  if (c->summary) {
    /* Decoded here, straight from the ring: a FAST frame's bytes are never copied. */
    /* The raw area holds only SLOW frames' bytes and is smaller than a batch of full-snaplen
     * frames: when this frame might not fit, the batch goes out first (direct output, no JS). */
    if (c->raw_used + caplen > c->raw_len && c->count > 0) out_batch(c);
    if (c->used + SUMMARY_BYTES > c->buf_len || c->raw_used + caplen > c->raw_len) return;
    uint64_t ts = (uint64_t)h->ts.tv_sec * 1000000000ull +
                  (uint64_t)h->ts.tv_usec * (c->nano ? 1ull : 1000ull);
    uint8_t *rec = c->buf + c->used;
    /* TPACKET_V3 lays a block's frames out back to back: start loading the next frame's header
     * and first bytes now, so its cache misses overlap this frame's decode. */
    __builtin_prefetch(bytes + caplen + 32);
    __builtin_prefetch(bytes + caplen + 96);
    __builtin_prefetch(bytes + caplen + 160);
    /* Headers-only retention cuts where the summarizer found the payload: no second walk. */
    /* Folding also needs it: where a payload that may start a request begins. */
    /* With folding the two payload hashes wait until the record is known to be sent. */
    int folding = fold_on(&c->fold);
    /* A packet of a flow already counting, of the commonest shape, is counted without a record
     * (fold_quick: the decision fold_packet makes, without summary_one). */
    SummaryQuick q;
    if (folding && summary_quick(bytes, caplen, c->linktype, c->ports, &q) &&
        fold_quick(&c->fold, bytes, caplen, h->len, ts, c->handed + 1, &q)) {
      c->handed += 1;
      c->read_bytes += caplen + 64;
      retain_skip(&c->retain);
      return;
    }
    uint32_t hend = caplen;
    int cut = retain_wants_cut(&c->retain);
    int fast = summary_one_ex(bytes, caplen, h->len, ts, c->linktype, c->ports, rec,
                              (uint32_t)c->raw_used, cut || folding ? &hend : NULL, !folding);
    double frame = ++c->handed;
    c->read_bytes += caplen + 64; /* the frame's ring slot, roughly (header, alignment) */
    /* Counted into its flow: the record is overwritten by the next frame's, and retention keeps
     * no bytes of it (a gap record: the collector never asks for a frame no event names). */
    if (fast && !fold_packet(&c->fold, rec, bytes, caplen, hend, frame)) {
      retain_skip(&c->retain);
      return;
    }
    retain_frame(&c->retain, h, bytes, cut ? hend : caplen);
    if (fast && folding) summary_hashes(bytes, caplen, hend, rec);
    if (!fast) {
      memcpy(c->raw + c->raw_used, bytes, caplen);
      c->raw_used += caplen;
    }
    if (c->count == 0) c->batch_first = frame;
    put_u32(rec + 188, (uint32_t)(frame - c->batch_first));
    c->used += SUMMARY_BYTES;
    c->count++;
    return;
  }
  size_t rec = REC_HDR + ALIGN8(caplen);
  /* Cannot happen (max_per_batch leaves room for a full-snaplen record each); never overrun. */
  if (c->used + rec > c->buf_len) return;
  uint8_t *o = c->buf + c->used;
  uint64_t ts = (uint64_t)h->ts.tv_sec * 1000000000ull +
                (uint64_t)h->ts.tv_usec * (c->nano ? 1ull : 1000ull);
  put_u32(o, caplen);
  put_u32(o + 4, h->len);
  put_u64(o + 8, ts);
  memcpy(o + REC_HDR, bytes, caplen);
  if (ALIGN8(caplen) > caplen) memset(o + REC_HDR + caplen, 0, ALIGN8(caplen) - caplen);
  c->used += rec;
  c->count++;
  c->handed += 1;
  retain_frame(&c->retain, h, bytes,
               retain_wants_cut(&c->retain)
                   ? summary_headers_end(bytes, caplen, c->linktype, c->retain_ports)
                   : caplen);
}

/* Calls fn(args) as an async callback (microtasks and nextTicks run after it, as for any I/O
 * callback); an exception becomes an uncaught exception, as from an event listener. */
static void call_js(Capture *c, napi_ref fn_ref, size_t argc, napi_value *argv) {
  napi_env env = c->env;
  napi_value fn, recv, result;
  if (napi_get_reference_value(env, fn_ref, &fn) != napi_ok) return;
  /* napi_make_callback needs an object receiver (undefined throws a TypeError). */
  if (napi_get_global(env, &recv) != napi_ok) return;
  napi_status st = napi_make_callback(env, c->async, recv, fn, argc, argv, &result);
  if (st == napi_pending_exception) {
    napi_value err;
    napi_get_and_clear_last_exception(env, &err);
    napi_fatal_exception(env, err);
  }
}

static void free_poll(uv_handle_t *h) { free(h); }

/* Releases the pcap handle and the JS references; the Capture itself lives until finalized. */
static void flush_pending(Capture *c);

static void free_timer(uv_handle_t *h) { free(h); }

static void do_close(Capture *c) {
  if (c->closed) return;
  /* Records decoded but held for coalescing go out first: they are counted as delivered. */
  flush_pending(c);
  c->closed = 1;
  if (c->flush_timer != NULL) {
    uv_timer_stop(c->flush_timer);
    uv_close((uv_handle_t *)c->flush_timer, free_timer);
    c->flush_timer = NULL;
  }
  if (c->busy_timer != NULL) {
    uv_timer_stop(c->busy_timer);
    uv_close((uv_handle_t *)c->busy_timer, free_timer);
    c->busy_timer = NULL;
  }
  if (c->gone_timer != NULL) {
    uv_timer_stop(c->gone_timer);
    uv_close((uv_handle_t *)c->gone_timer, free_timer);
    c->gone_timer = NULL;
  }
  if (c->poll != NULL) {
    uv_poll_stop(c->poll);
    uv_close((uv_handle_t *)c->poll, free_poll);
    c->poll = NULL;
  }
  if (c->p != NULL) {
    if (pcap_stats(c->p, &c->last) == 0) c->have_last = 1;
    pcap_close(c->p);
    c->p = NULL;
  }
  /* After the last delivery: the file holds every frame handed on. */
  retain_close(&c->retain);
  fold_close(&c->fold);
  napi_env env = c->env;
  if (c->on_batch != NULL) napi_delete_reference(env, c->on_batch);
  if (c->on_error != NULL) napi_delete_reference(env, c->on_error);
  if (c->buf_ref != NULL) napi_delete_reference(env, c->buf_ref);
  if (c->ports_ref != NULL) napi_delete_reference(env, c->ports_ref);
  if (c->retain_ports_ref != NULL) napi_delete_reference(env, c->retain_ports_ref);
  c->retain_ports_ref = NULL;
  c->retain_ports = default_udp_ports();
  if (c->out_ref != NULL) napi_delete_reference(env, c->out_ref);
  c->on_batch = c->on_error = c->buf_ref = c->ports_ref = c->out_ref = NULL;
  c->out = NULL;
  free(c->fhead);
  c->fhead = NULL;
  c->buf = NULL;
  free(c->raw);
  c->raw = NULL;
  c->ports = NULL;
  if (c->async != NULL) napi_async_destroy(env, c->async);
  c->async = NULL;
  if (c->self != NULL) napi_reference_unref(env, c->self, NULL);
}

static void report_error(Capture *c, const char *code, const char *msg) {
  c->failed = 1;
  if (c->poll != NULL) uv_poll_stop(c->poll);
  napi_value argv[2];
  napi_create_string_utf8(c->env, code, NAPI_AUTO_LENGTH, &argv[0]);
  napi_create_string_utf8(c->env, msg, NAPI_AUTO_LENGTH, &argv[1]);
  c->in_js = 1;
  call_js(c, c->on_error, 2, argv);
  c->in_js = 0;
}

static void put_u32be(uint8_t *o, uint32_t v) {
  o[0] = (uint8_t)(v >> 24);
  o[1] = (uint8_t)(v >> 16);
  o[2] = (uint8_t)(v >> 8);
  o[3] = (uint8_t)v;
}

/* The batch as one type-4 frame (layout: agent/capture/worker-frames.ts encodeSummaryFrame):
 * header template patched in place, then the records and the SLOW frames' bytes, one writev. */
static void deliver_frame(Capture *c) {
  size_t body = c->fhead_len - 5 + c->used + c->raw_used;
  double first = c->batch_first;
  uint64_t first_bits;
  memcpy(&first_bits, &first, sizeof first_bits);
  uint8_t *h = c->fhead;
  put_u32be(h, (uint32_t)(body + 1));
  put_u32(h + 5, c->count);
  put_u32(h + 9, c->linktype);
  put_u64(h + 13, first_bits);
  put_u32(h + 21, (uint32_t)c->raw_used);
  struct iovec iov[3] = {
      {h, c->fhead_len}, {c->buf, c->used}, {c->raw, c->raw_used}};
  FrameOut *o = c->out != NULL ? c->out->o : NULL;
  int rc = o != NULL ? frame_out_writev(o, iov, c->raw_used > 0 ? 3 : 2, 1) : FRAME_OUT_FAILED;
  if (rc != FRAME_OUT_WRITTEN) c->out_drops += fold_batch_packets(c->buf, c->count);
}

static void deliver(Capture *c) {
  if (c->fhead != NULL) {
    deliver_frame(c);
    return;
  }
  napi_env env = c->env;
  napi_value argv[3];
  if (napi_get_reference_value(env, c->buf_ref, &argv[0]) != napi_ok) return;
  napi_create_uint32(env, c->count, &argv[1]);
  napi_create_uint32(env, (uint32_t)c->used, &argv[2]);
  c->in_js = 1;
  call_js(c, c->on_batch, 3, argv);
  c->in_js = 0;
}

static void on_poll(uv_poll_t *h, int status, int events);

/* Hands the batch on and starts the next one. With folding, the pending flow counters go with it
 * (in more than one frame when the batch has no room for them all). */
static void out_batch(Capture *c) {
  while (fold_pending(&c->fold)) {
    size_t room = (c->buf_len - c->used) / SUMMARY_BYTES;
    if (room > (size_t)(c->max_per_batch - (int)c->count))
      room = (size_t)(c->max_per_batch - (int)c->count);
    size_t n = room > 0 ? fold_flush(&c->fold, c->buf + c->used, room) : 0;
    if (c->count == 0) c->batch_first = c->handed;
    c->used += n * SUMMARY_BYTES;
    c->count += (uint32_t)n;
    if (!fold_pending(&c->fold) || c->count == 0) break;
    deliver(c);
    c->used = 0;
    c->count = 0;
    c->raw_used = 0;
  }
  if (c->count > 0) {
    deliver(c);
    c->last_out_ns = uv_hrtime();
  }
  c->used = 0;
  c->count = 0;
  c->raw_used = 0;
}

/* How long counter records alone may wait for their frame (dispatch_rounds). */
#define FOLD_FLUSH_NS 1000000000ull

/* Writes what coalescing holds (direct output only; no JavaScript runs). */
static void flush_pending(Capture *c) {
  if (c->flush_timer != NULL) uv_timer_stop(c->flush_timer);
  if (c->fhead != NULL && (c->count > 0 || fold_pending(&c->fold)) && !c->closed) out_batch(c);
}

static void on_flush_timer(uv_timer_t *t) { flush_pending((Capture *)t->data); }

static void begin_gone(Capture *c, const char *msg);

/* The capture's interface no longer exists (`any` never goes away). */
static int iface_gone(const Capture *c) {
  return strcmp(c->iface, "any") != 0 && if_nametoindex(c->iface) == 0;
}

/* Up to `rounds` pcap_dispatch calls; stops early when the ring is drained (fewer packets than
 * asked for). Without coalescing each call's packets are delivered as one batch. With it, records
 * accumulate until the batch is full or coalesce_ns have passed since the last frame; what is
 * left is written by the flush timer (or drain/close). Returns the packets read, or -1 after a
 * read error (reported through onError). Call with a handle scope open and outside onBatch. */
static int64_t dispatch_rounds(Capture *c, int rounds) {
  int coalesce = c->fhead != NULL && c->coalesce_ns > 0;
  int64_t total = 0;
  c->drained = 0;
  for (int round = 0; round < rounds; round++) {
    int room = c->max_per_batch - (int)c->count;
    if (room <= 0) {
      out_batch(c);
      room = c->max_per_batch;
    }
    double before = c->handed; /* not c->count: a batch may go out inside the callback */
    int n = pcap_dispatch(c->p, room, on_packet, (u_char *)c);
    if (n < 0) {
      /* Reading what is left after the interface went away: the ring is empty. */
      if (c->going) break;
      if (iface_gone(c)) begin_gone(c, pcap_geterr(c->p));
      else report_error(c, "READ_ERROR", pcap_geterr(c->p));
      return -1;
    }
    total += (int64_t)(c->handed - before);
    if (!coalesce || (int)c->count >= c->max_per_batch) out_batch(c);
    if (c->close_pending || c->closed || c->failed) break;
    if (n < room) {
      c->drained = 1; /* the ring is drained */
      break;
    }
  }
  if (coalesce && (c->count > 0 || fold_pending(&c->fold)) && !c->closed && !c->failed) {
    /* Only counters to write (every packet since the last frame was counted): they wait up to
     * FOLD_FLUSH_NS, so a folded flood wakes the agent once a second, not ten times. */
    uint64_t due = c->count > 0 || c->coalesce_ns >= FOLD_FLUSH_NS ? c->coalesce_ns : FOLD_FLUSH_NS;
    uint64_t now = uv_hrtime();
    if (now - c->last_out_ns >= due) {
      flush_pending(c);
    } else if (c->flush_timer != NULL) {
      uint64_t wait_ms = (c->last_out_ns + due - now + 999999) / 1000000;
      /* Started for counters alone, it is brought forward when a packet record joins them. */
      if (!uv_is_active((uv_handle_t *)c->flush_timer) ||
          uv_timer_get_due_in(c->flush_timer) > wait_ms)
        uv_timer_start(c->flush_timer, on_flush_timer, wait_ms, 0);
    }
  }
  return total;
}

/* The socket reported an error (libuv stops the handle on POLLERR). ENETDOWN comes both when the
 * interface is set down and when it is removed (net/packet/af_packet.c packet_notifier): only the
 * second ends the capture; a down interface may come up again. */
static void on_down_timer(uv_timer_t *t);

/* The interface is down (or a socket error came while it still has a name): true while it is
 * there and not up. */
static int iface_down(Capture *c) {
  if (strcmp(c->iface, "any") == 0) return 0;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) return 0;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", c->iface);
  int r = ioctl(s, SIOCGIFFLAGS, &ifr);
  close(s);
  return r == 0 && (ifr.ifr_flags & IFF_UP) == 0;
}

/* How often a down interface is looked at again. */
#define DOWN_RECHECK_MS 100

static void on_poll_error(Capture *c, int status) {
  int err = 0;
  socklen_t len = sizeof err;
  int fd = pcap_get_selectable_fd(c->p);
  if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = 0;
  char msg[256];
  if (iface_gone(c)) {
    snprintf(msg, sizeof msg, "interface %s disappeared (%s)", c->iface,
             err != 0 ? strerror(err) : uv_strerror(status));
    begin_gone(c, msg);
    return;
  }
  if (err == ENETDOWN || err == 0) {
    uv_poll_start(c->poll, UV_READABLE, on_poll); /* down, not gone: keep waiting */
    /* Removing an interface sets it down first: the socket reports ENETDOWN then, and nothing
     * more when it is unregistered a moment later (af_packet's notifier has already unhooked
     * it). So a down interface is looked at again until it is gone or up. */
    if (c->gone_timer != NULL) uv_timer_start(c->gone_timer, on_down_timer, DOWN_RECHECK_MS, 0);
    return;
  }
  snprintf(msg, sizeof msg, "capture socket error: %s", strerror(err));
  report_error(c, "READ_ERROR", msg);
}

/* After the block timeout (and a margin): the kernel's block timer has retired the block that was
 * being filled when the interface went away; read it, write what coalescing holds, report. */
#define GONE_GRACE_MS 20

static void on_gone_timer(uv_timer_t *t) {
  Capture *c = (Capture *)t->data;
  if (c->closed || c->failed) return;
  napi_handle_scope scope;
  if (napi_open_handle_scope(c->env, &scope) != napi_ok) return;
  dispatch_rounds(c, MAX_ROUNDS);
  if (!c->closed && !c->close_pending) {
    flush_pending(c);
    report_error(c, "IFACE_GONE", c->gone_msg);
  }
  if (c->close_pending) do_close(c);
  napi_close_handle_scope(c->env, scope);
}

/*
 * The interface went away (a pod deleted mid-request): the packets already in the kernel ring
 * were captured before that and are delivered before the capture ends. Retired blocks are read
 * now; the block being filled is retired by the kernel's block timer (it runs on after the
 * interface is gone) and read by on_gone_timer, which then reports IFACE_GONE.
 */
/* A down interface looked at again (on_poll_error): gone → begin_gone; still down → later. */
static void on_down_timer(uv_timer_t *t) {
  Capture *c = (Capture *)t->data;
  if (c->closed || c->failed || c->going || c->close_pending) return;
  if (iface_gone(c)) {
    napi_handle_scope scope;
    if (napi_open_handle_scope(c->env, &scope) != napi_ok) return;
    char msg[256];
    snprintf(msg, sizeof msg, "interface %s disappeared (it went down, then away)", c->iface);
    begin_gone(c, msg);
    if (c->close_pending) do_close(c);
    napi_close_handle_scope(c->env, scope);
    return;
  }
  if (iface_down(c)) uv_timer_start(t, on_down_timer, DOWN_RECHECK_MS, 0);
}

static void begin_gone(Capture *c, const char *msg) {
  if (c->going) return;
  c->going = 1;
  snprintf(c->gone_msg, sizeof c->gone_msg, "%s", msg);
  if (c->poll != NULL) uv_poll_stop(c->poll);
  if (c->busy_timer != NULL) uv_timer_stop(c->busy_timer);
  c->busy = 0;
  dispatch_rounds(c, MAX_ROUNDS);
  if (c->closed || c->close_pending || c->gone_timer == NULL) return;
  uv_timer_start(c->gone_timer, on_gone_timer, c->timeout_ms + GONE_GRACE_MS, 0);
}

/* Busy ticks read more rounds than a poll wake-up: no JavaScript runs per batch (direct output). */
#define BUSY_ROUNDS 16
/* libpcap's TPACKET_V3 block size (pcap-linux.c create_ring: a page doubled up to
 * MAXIMUM_SNAPLEN, 256 KiB, since libpcap 1.5): each poll wake-up means a block retired. */
#define RING_BLOCK_BYTES (256.0 * 1024)

static void on_busy_tick(uv_timer_t *t) {
  Capture *c = (Capture *)t->data;
  if (c->closed || c->failed || c->going) return;
  napi_handle_scope scope;
  if (napi_open_handle_scope(c->env, &scope) != napi_ok) return;
  c->timer_wakeups += 1;
  double before = c->read_bytes;
  int64_t n = dispatch_rounds(c, BUSY_ROUNDS);
  if (n >= 0 && !c->closed && !c->failed && !c->close_pending) {
    if (n == 0 || (c->read_bytes - before) * 4 > c->ring_bytes) {
      /* Nothing retired since the last tick, or the ring filled by more than a quarter between
       * ticks (a small ring, or traffic beyond what the period allows): back to the socket. */
      c->busy = 0;
      c->last_wake_ns = 0;
      uv_poll_start(c->poll, UV_READABLE, on_poll);
    } else {
      /* Still busy: the next tick after the period, or at once when BUSY_ROUNDS full batches
       * did not empty the ring. */
      uv_timer_start(c->busy_timer, on_busy_tick, c->drained ? c->busy_ms : 0, 0);
    }
  }
  if (c->close_pending) do_close(c);
  napi_close_handle_scope(c->env, scope);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  Capture *c = (Capture *)h->data;
  if (c->closed || c->failed || c->going) return;
  napi_handle_scope scope;
  if (napi_open_handle_scope(c->env, &scope) != napi_ok) return;
  if (status < 0) {
    on_poll_error(c, status);
  } else {
    c->poll_wakeups += 1;
    double before = c->read_bytes;
    int64_t n = dispatch_rounds(c, MAX_ROUNDS);
    if (c->busy_timer != NULL && n > 0 && !c->closed && !c->failed && !c->close_pending) {
      uint64_t now = uv_hrtime();
      double since = (double)(now - c->last_wake_ns), period = (double)c->busy_ms * 1e6;
      /* Busy: wake-ups closer than the period, and the ring big enough to hold four periods of
       * the traffic (else it would overflow between ticks). A wake-up means at least one block
       * retired, so the traffic is taken as at least a block per wake-up: a wake-up that read
       * only a few packets (a block cut by its timeout) must not make a burst look light. */
      double got = c->read_bytes - before;
      if (got < RING_BLOCK_BYTES) got = RING_BLOCK_BYTES;
      if (c->last_wake_ns != 0 && since < period && got * (period / since) * 4 <= c->ring_bytes) {
        c->busy = 1;
        uv_poll_stop(c->poll);
        uv_timer_start(c->busy_timer, on_busy_tick, c->busy_ms, 0);
      }
      c->last_wake_ns = now;
    }
  }
  if (c->close_pending) do_close(c);
  napi_close_handle_scope(c->env, scope);
}

/* ---- JS glue --------------------------------------------------------------------------------- */

static int get_prop(napi_env env, napi_value obj, const char *name, napi_valuetype want,
                    napi_value *out) {
  bool has = false;
  if (napi_has_named_property(env, obj, name, &has) != napi_ok || !has) return 0;
  if (napi_get_named_property(env, obj, name, out) != napi_ok) return 0;
  napi_valuetype t;
  napi_typeof(env, *out, &t);
  return t == want;
}

static int64_t get_int(napi_env env, napi_value obj, const char *name, int64_t dflt) {
  napi_value v;
  int64_t out = dflt;
  if (get_prop(env, obj, name, napi_number, &v)) napi_get_value_int64(env, v, &out);
  return out;
}

static int get_bool(napi_env env, napi_value obj, const char *name, int dflt) {
  napi_value v;
  bool out = dflt;
  if (get_prop(env, obj, name, napi_boolean, &v)) napi_get_value_bool(env, v, &out);
  return out;
}

/* A string property into buf; "" when absent. Returns 0 when it does not fit. */
static int get_str(napi_env env, napi_value obj, const char *name, char *buf, size_t size) {
  napi_value v;
  size_t len = 0;
  buf[0] = 0;
  if (!get_prop(env, obj, name, napi_string, &v)) return 1;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok || len + 1 > size) return 0;
  napi_get_value_string_utf8(env, v, buf, size, &len);
  return 1;
}

static napi_value throw_code(napi_env env, const char *code, const char *msg) {
  napi_throw_error(env, code, msg);
  return NULL;
}

static Capture *unwrap_this(napi_env env, napi_callback_info info) {
  napi_value self;
  void *data = NULL;
  if (napi_get_cb_info(env, info, NULL, NULL, &self, NULL) != napi_ok) return NULL;
  if (napi_unwrap(env, self, &data) != napi_ok) return NULL;
  return (Capture *)data;
}

static void finalize(napi_env env, void *data, void *hint) {
  Capture *c = (Capture *)data;
  do_close(c);
  if (c->self != NULL) napi_delete_reference(env, c->self);
  free(c);
}

static napi_value set_num(napi_env env, napi_value obj, const char *name, double v) {
  napi_value n;
  CHECK(napi_create_double(env, v, &n));
  CHECK(napi_set_named_property(env, obj, name, n));
  return obj;
}

static napi_value set_str(napi_env env, napi_value obj, const char *name, const char *s) {
  napi_value n;
  CHECK(napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &n));
  CHECK(napi_set_named_property(env, obj, name, n));
  return obj;
}

/* A timer handle for c on loop (freed by free_timer once closed), or NULL. */
static uv_timer_t *new_timer(uv_loop_t *loop, Capture *c) {
  uv_timer_t *t = calloc(1, sizeof *t);
  if (t == NULL || uv_timer_init(loop, t) != 0) {
    free(t);
    return NULL;
  }
  t->data = c;
  return t;
}

/* new Capture(opts, onBatch, onError) */
static napi_value capture_new(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], self;
  CHECK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
  napi_valuetype t0, t1, t2;
  if (argc < 3 || napi_typeof(env, argv[0], &t0) != napi_ok ||
      napi_typeof(env, argv[1], &t1) != napi_ok || napi_typeof(env, argv[2], &t2) != napi_ok ||
      t0 != napi_object || t1 != napi_function || t2 != napi_function)
    return throw_code(env, "BAD_ARGUMENT", "usage: new Capture(options, onBatch, onError)");
  napi_value opts = argv[0];

  char iface[IFNAMSIZ + 1];
  char filter[8192];
  char prec[16];
  if (!get_str(env, opts, "iface", iface, sizeof iface) || iface[0] == 0)
    return throw_code(env, "BAD_ARGUMENT", "iface: an interface name of at most 15 bytes");
  if (!get_str(env, opts, "filter", filter, sizeof filter))
    return throw_code(env, "BAD_ARGUMENT", "filter: at most 8191 bytes");
  if (!get_str(env, opts, "tstampPrecision", prec, sizeof prec))
    return throw_code(env, "BAD_ARGUMENT", "tstampPrecision: 'nano' or 'micro'");
  int64_t snaplen = get_int(env, opts, "snaplen", 512);
  int64_t buffer_bytes = get_int(env, opts, "bufferBytes", 32 << 20);
  int64_t timeout_ms = get_int(env, opts, "timeoutMs", 50);
  int64_t batch_bytes = get_int(env, opts, "batchBytes", 1 << 20);
  int64_t coalesce_ms = get_int(env, opts, "coalesceMs", 0);
  int64_t fold_first = get_int(env, opts, "foldFirst", 0);
  int64_t fold_slots = get_int(env, opts, "foldSlots", FOLD_DEFAULT_SLOTS);
  int64_t busy_ms = get_int(env, opts, "busyPollMs", 0);
  int64_t retain_fd = get_int(env, opts, "retainFd", -1);
  int64_t retain_snaplen = get_int(env, opts, "retainSnaplen", 256);
  int64_t retain_max = get_int(env, opts, "retainMaxBytes", 64 << 20);
  int retain_payload = get_bool(env, opts, "retainPayload", 0);
  napi_value rports_val = NULL;
  uint8_t *rports = NULL;
  size_t rports_len = 0;
  if (get_prop(env, opts, "retainPorts", napi_object, &rports_val) &&
      (napi_get_buffer_info(env, rports_val, (void **)&rports, &rports_len) != napi_ok ||
       rports_len < 65536))
    return throw_code(env, "BAD_ARGUMENT", "retainPorts: a 65536-byte UDP port table");
  int immediate = get_bool(env, opts, "immediate", 0);
  int promisc = get_bool(env, opts, "promisc", 1);
  int want_nano = strcmp(prec, "micro") != 0;
  napi_value ports_val = NULL;
  uint8_t *ports = NULL;
  size_t ports_len = 0;
  if (get_prop(env, opts, "summaryPorts", napi_object, &ports_val)) {
    if (napi_get_buffer_info(env, ports_val, (void **)&ports, &ports_len) != napi_ok || ports_len < 65536)
      return throw_code(env, "BAD_ARGUMENT", "summaryPorts: a 65536-byte UDP port table");
  }
  napi_value out_val = NULL;
  FrameWriter *out = NULL;
  char context[1024];
  if (get_prop(env, opts, "frameOut", napi_object, &out_val)) {
    bool tagged = false;
    if (ports == NULL)
      return throw_code(env, "BAD_ARGUMENT", "frameOut needs summary mode (summaryPorts)");
    if (napi_check_object_type_tag(env, out_val, &FRAME_WRITER_TAG, &tagged) != napi_ok ||
        !tagged || napi_unwrap(env, out_val, (void **)&out) != napi_ok || out == NULL ||
        out->o == NULL)
      return throw_code(env, "BAD_ARGUMENT", "frameOut: an open FrameWriter");
    if (!get_str(env, opts, "frameContext", context, sizeof context))
      return throw_code(env, "BAD_ARGUMENT", "frameContext: JSON of at most 1023 bytes");
  } else if (ports != NULL) {
    return throw_code(env, "BAD_ARGUMENT",
                      "summaryPorts needs frameOut (summary mode writes its batches itself)");
  }
  if (snaplen < 64 || snaplen > 262144)
    return throw_code(env, "BAD_ARGUMENT", "snaplen must be within 64..262144");
  if (buffer_bytes < 4096 || buffer_bytes > ((int64_t)1 << 31) - 1)
    return throw_code(env, "BAD_ARGUMENT", "bufferBytes must be within 4096..2^31-1");
  if (timeout_ms < 1 || timeout_ms > 60000)
    return throw_code(env, "BAD_ARGUMENT", "timeoutMs must be within 1..60000");
  if (batch_bytes < 65536 || batch_bytes > (64 << 20))
    return throw_code(env, "BAD_ARGUMENT", "batchBytes must be within 64 KiB..64 MiB");
  if (coalesce_ms < 0 || coalesce_ms > 1000 || (coalesce_ms > 0 && out == NULL))
    return throw_code(env, "BAD_ARGUMENT", "coalesceMs must be within 0..1000, with frameOut");
  if (busy_ms < 0 || busy_ms > 1000 || (busy_ms > 0 && out == NULL))
    return throw_code(env, "BAD_ARGUMENT", "busyPollMs must be within 0..1000, with frameOut");
  if (fold_first < 0 || fold_first > 65535 || (fold_first > 0 && out == NULL))
    return throw_code(env, "BAD_ARGUMENT", "foldFirst must be within 0..65535, with frameOut");
  if (fold_slots < 16 || fold_slots > (1 << 20) || (fold_slots & (fold_slots - 1)) != 0)
    return throw_code(env, "BAD_ARGUMENT", "foldSlots must be a power of two within 16..2^20");
  if (retain_fd < -1 || retain_fd > 65535)
    return throw_code(env, "BAD_ARGUMENT", "retainFd must be an open file descriptor (or -1)");
  if (retain_snaplen < 64 || retain_snaplen > 262144)
    return throw_code(env, "BAD_ARGUMENT", "retainSnaplen must be within 64..262144");
  if (retain_max < 24 || retain_max > ((int64_t)1 << 40))
    return throw_code(env, "BAD_ARGUMENT", "retainMaxBytes must be within 24..2^40");

  char errbuf[PCAP_ERRBUF_SIZE] = {0};
  pcap_t *p = pcap_create(iface, errbuf);
  if (p == NULL) return throw_code(env, "ACTIVATE", errbuf);
  pcap_set_snaplen(p, (int)snaplen);
  pcap_set_promisc(p, promisc);
  pcap_set_buffer_size(p, (int)buffer_bytes);
  pcap_set_timeout(p, (int)timeout_ms);
  pcap_set_immediate_mode(p, immediate);
  int nano = 0;
  if (want_nano && pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO) == 0) nano = 1;

  int rc = pcap_activate(p);
  if (rc < 0) {
    char msg[PCAP_ERRBUF_SIZE + 64];
    const char *code = rc == PCAP_ERROR_NO_SUCH_DEVICE ? "NO_SUCH_DEVICE"
                       : rc == PCAP_ERROR_PERM_DENIED  ? "PERM_DENIED"
                                                       : "ACTIVATE";
    const char *detail = pcap_geterr(p);
    snprintf(msg, sizeof msg, "%s",
             detail != NULL && detail[0] != 0 ? detail : pcap_statustostr(rc));
    pcap_close(p);
    return throw_code(env, code, msg);
  }
  if (nano) nano = pcap_get_tstamp_precision(p) == PCAP_TSTAMP_PRECISION_NANO;
  /* `any`: Linux cooked v2 (libpcap ≥ 1.10) rather than v1, the default: its header names the
   * interface (ifindex), which the filter below needs. Left at v1 when libpcap cannot. */
  int any = strcmp(iface, "any") == 0;
  if (any) (void)pcap_set_datalink(p, DLT_LINUX_SLL2);

  struct bpf_program prog;
  if (pcap_compile(p, &prog, filter, 1, PCAP_NETMASK_UNKNOWN) != 0) {
    char msg[PCAP_ERRBUF_SIZE];
    snprintf(msg, sizeof msg, "%s", pcap_geterr(p));
    pcap_close(p);
    return throw_code(env, "BAD_FILTER", msg);
  }
  /* On `any` the tap also sees loopback's outgoing copy of each packet, which libpcap discards in
   * user space after the kernel counted it (ps_recv): recv - drop - delivered would report it as
   * lost. With LINUX_SLL2 the filter can name the interface, so the kernel leaves those copies
   * out (and out of its counters): (filter) and not (outbound and ifindex <lo>). LINUX_SLL cannot
   * say ifindex; the user's filter then stays as it is. */
  unsigned lo = if_nametoindex("lo");
  if (any && pcap_datalink(p) == DLT_LINUX_SLL2 && lo != 0) {
    char both[sizeof filter + 64];
    int n = filter[0] != 0
                ? snprintf(both, sizeof both, "(%s) and not (outbound and ifindex %u)", filter, lo)
                : snprintf(both, sizeof both, "not (outbound and ifindex %u)", lo);
    struct bpf_program narrower;
    if (n > 0 && (size_t)n < sizeof both &&
        pcap_compile(p, &narrower, both, 1, PCAP_NETMASK_UNKNOWN) == 0) {
      pcap_freecode(&prog);
      prog = narrower;
    }
  }
  rc = pcap_setfilter(p, &prog);
  pcap_freecode(&prog);
  if (rc != 0) {
    char msg[PCAP_ERRBUF_SIZE];
    snprintf(msg, sizeof msg, "%s", pcap_geterr(p));
    pcap_close(p);
    return throw_code(env, "BAD_FILTER", msg);
  }
  if (pcap_setnonblock(p, 1, errbuf) != 0) {
    pcap_close(p);
    return throw_code(env, "ACTIVATE", errbuf);
  }
  int fd = pcap_get_selectable_fd(p);
  if (fd < 0) {
    pcap_close(p);
    return throw_code(env, "ACTIVATE", "this interface has no selectable descriptor");
  }

  /* On a loopback interface every packet passes the tap twice, outgoing and incoming; libpcap
   * throws the outgoing copy away in user space, but the kernel's counters (ps_recv) include it,
   * so recv - drop - delivered would report half the traffic as lost. Not receiving the outgoing
   * copy at all (Linux ≥ 4.20) makes the counters count what we see. */
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  memcpy(ifr.ifr_name, iface, strnlen(iface, sizeof ifr.ifr_name - 1));
  if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_LOOPBACK) != 0) {
    int one = 1;
    (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  }

  Capture *c = calloc(1, sizeof *c);
  if (c == NULL) {
    pcap_close(p);
    return throw_code(env, "ACTIVATE", "out of memory");
  }
  c->env = env;
  c->p = p;
  c->nano = nano;
  snprintf(c->iface, sizeof c->iface, "%s", iface);
  int snap = pcap_snapshot(p);
  if (retain_fd >= 0) {
    /* Never fatal: a capture without retention still captures; the state and error say why. */
    uint32_t keep = (uint32_t)(retain_snaplen < snap ? retain_snaplen : snap);
    (void)retain_open(&c->retain, (int)retain_fd, (uint32_t)dlt_to_linktype(pcap_datalink(p)),
                      keep, (uint64_t)retain_max, nano, retain_payload);
  }
  c->linktype = (uint32_t)dlt_to_linktype(pcap_datalink(p));
  c->retain_ports = default_udp_ports();
  c->buf_len = (size_t)batch_bytes;
  c->max_per_batch = (int)(c->buf_len / (REC_HDR + ALIGN8(snap)));
  if (c->max_per_batch < 1) c->max_per_batch = 1;
  if (ports != NULL) {
    /* batchBytes of records; SLOW frames' bytes in a raw area of a quarter of that (at least 16
     * full-snaplen frames). Sizing raw for a whole batch of full-snaplen frames instead capped a
     * batch at batchBytes / (16 + snaplen) records (~4 k at 2 MiB and snaplen 512) and so woke the
     * agent ~3x as often at a busy backend; now a batch whose raw area fills goes out early
     * (on_packet), which only many SLOW frames can cause. */
    c->summary = 1;
    c->max_per_batch = (int)((size_t)batch_bytes / SUMMARY_BYTES);
    c->buf_len = (size_t)c->max_per_batch * SUMMARY_BYTES;
    c->raw_len = (size_t)batch_bytes / 4;
    if (c->raw_len < 16 * (size_t)snap) c->raw_len = 16 * (size_t)snap;
  }

  napi_value buf, name;
  void *data = NULL;
  napi_status st = napi_create_buffer(env, c->buf_len, &data, &buf);
  if (st == napi_ok) st = napi_create_reference(env, buf, 1, &c->buf_ref);
  if (st == napi_ok && c->summary) {
    c->raw = malloc(c->raw_len);
    if (c->raw == NULL) st = napi_generic_failure;
    if (st == napi_ok) st = napi_create_reference(env, ports_val, 1, &c->ports_ref);
    c->ports = ports;
  }
  if (st == napi_ok && rports != NULL) {
    st = napi_create_reference(env, rports_val, 1, &c->retain_ports_ref);
    c->retain_ports = rports;
  }
  if (st == napi_ok && out != NULL) {
    /* Header template: u32 BE length | type 4 | u32 count | u32 linktype | f64 first frame |
     * u32 raw bytes | u16 context length | context | zero padding to 8 (from the body start). */
    size_t ctx_len = strlen(context);
    size_t head = (22 + ctx_len + 7) & ~(size_t)7;
    c->fhead_len = 5 + head;
    c->fhead = calloc(1, c->fhead_len);
    if (c->fhead == NULL) st = napi_generic_failure;
    if (st == napi_ok) st = napi_create_reference(env, out_val, 1, &c->out_ref);
    if (st == napi_ok) {
      c->fhead[4] = 4;
      c->fhead[5 + 20] = (uint8_t)ctx_len;
      c->fhead[5 + 21] = (uint8_t)(ctx_len >> 8);
      memcpy(c->fhead + 5 + 22, context, ctx_len);
      c->out = out;
    }
  }
  if (st == napi_ok) st = napi_create_reference(env, argv[1], 1, &c->on_batch);
  if (st == napi_ok) st = napi_create_reference(env, argv[2], 1, &c->on_error);
  if (st == napi_ok)
    st = napi_create_string_utf8(env, "hoptrace:pcap-batch", NAPI_AUTO_LENGTH, &name);
  if (st == napi_ok) st = napi_async_init(env, self, name, &c->async);
  if (st == napi_ok) st = napi_wrap(env, self, c, finalize, NULL, &c->self);
  if (st != napi_ok) {
    do_close(c);
    free(c);
    return throw_code(env, "ACTIVATE", "cannot set up the JS side of the capture");
  }
  c->buf = data;
  napi_reference_ref(env, c->self, NULL); /* strong until close() */

  uv_loop_t *loop = NULL;
  c->poll = calloc(1, sizeof *c->poll);
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || c->poll == NULL ||
      uv_poll_init(loop, c->poll, fd) != 0) {
    free(c->poll);
    c->poll = NULL;
    do_close(c);
    return throw_code(env, "ACTIVATE", "cannot poll the capture descriptor");
  }
  c->poll->data = c;
  if (coalesce_ms > 0) {
    c->flush_timer = new_timer(loop, c);
    if (c->flush_timer == NULL) {
      do_close(c);
      return throw_code(env, "ACTIVATE", "cannot set up the coalescing timer");
    }
    uv_unref((uv_handle_t *)c->flush_timer); /* the poll keeps the loop alive, not this */
    c->coalesce_ns = (uint64_t)coalesce_ms * 1000000u;
  }
  if (c->summary && fold_first > 0 &&
      fold_open(&c->fold, (uint32_t)fold_slots, (uint32_t)fold_first) != 0) {
    do_close(c);
    return throw_code(env, "ACTIVATE", "cannot allocate the flow table (foldSlots)");
  }
  /* ref'd: while it runs (the interface gone, the ring read once more) it keeps the loop alive. */
  c->gone_timer = new_timer(loop, c);
  if (c->gone_timer == NULL) {
    do_close(c);
    return throw_code(env, "ACTIVATE", "cannot set up the interface-gone timer");
  }
  c->timeout_ms = (uint64_t)timeout_ms;
  if (busy_ms > 0) {
    c->busy_timer = new_timer(loop, c);
    if (c->busy_timer == NULL) {
      do_close(c);
      return throw_code(env, "ACTIVATE", "cannot set up the busy-polling timer");
    }
    c->busy_ms = (uint64_t)busy_ms; /* ref'd: while busy it keeps the loop alive, as the poll */
    c->ring_bytes = (double)buffer_bytes;
  }
  uv_poll_start(c->poll, UV_READABLE, on_poll);

  int dlt = pcap_datalink(p);
  const char *dlt_name = pcap_datalink_val_to_name(dlt);
  set_num(env, self, "linktype", dlt_to_linktype(dlt));
  set_str(env, self, "linktypeName", dlt_name != NULL ? dlt_name : "unknown");
  set_num(env, self, "snaplen", snap);
  set_str(env, self, "tstampPrecision", nano ? "nano" : "micro");
  return self;
}

static napi_value capture_stats(napi_env env, napi_callback_info info) {
  Capture *c = unwrap_this(env, info);
  if (c == NULL) return throw_code(env, "BAD_ARGUMENT", "not a Capture");
  struct pcap_stat s;
  memset(&s, 0, sizeof s);
  if (c->p != NULL) {
    if (pcap_stats(c->p, &s) != 0) return throw_code(env, "STATS", pcap_geterr(c->p));
  } else if (c->have_last) {
    s = c->last;
  }
  napi_value out;
  CHECK(napi_create_object(env, &out));
  set_num(env, out, "recv", s.ps_recv);
  set_num(env, out, "drop", s.ps_drop);
  set_num(env, out, "ifdrop", s.ps_ifdrop);
  set_num(env, out, "delivered", c->handed);
  /* Between dispatch rounds only a coalescing batch holds records (the others went out). */
  set_num(env, out, "held", c->fhead != NULL ? fold_batch_packets(c->buf, c->count) + c->fold.held : 0);
  set_num(env, out, "outDrops", c->out_drops);
  set_num(env, out, "pollWakeups", c->poll_wakeups);
  set_num(env, out, "timerWakeups", c->timer_wakeups);
  /* Frames the file covers: kept, or in a gap record (pending ones included). */
  set_num(env, out, "retained", c->retain.kept + c->retain.skipped + c->retain.gap);
  set_num(env, out, "retainSkipped", c->retain.skipped + c->retain.gap);
  set_num(env, out, "retainDropped", c->retain.dropped);
  set_num(env, out, "retainBytes", (double)(c->retain.state == RETAIN_OFF ? 0 : c->retain.bytes));
  set_num(env, out, "retainSnaplen", c->retain.snaplen);
  set_str(env, out, "retainState", retain_state_name(&c->retain));
  set_num(env, out, "folded", c->fold.folded);
  set_num(env, out, "foldFlows", c->fold.flows);
  set_num(env, out, "foldFullSent", c->fold.full_sent);
  if (c->retain.err != 0) set_str(env, out, "retainError", strerror(c->retain.err));
  napi_value busy;
  if (napi_get_boolean(env, c->busy != 0, &busy) == napi_ok)
    napi_set_named_property(env, out, "busy", busy);
  return out;
}

/* h.drain(rounds) -> packets delivered now: reads what the ring holds (retired blocks) right away,
 * in up to `rounds` batches (default 64), without waiting for the poll. 0 when closed, failed or
 * called inside onBatch. */
static napi_value capture_drain(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], self, out;
  void *data = NULL;
  CHECK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
  if (napi_unwrap(env, self, &data) != napi_ok || data == NULL)
    return throw_code(env, "BAD_ARGUMENT", "not a Capture");
  Capture *c = (Capture *)data;
  int64_t rounds = 64;
  if (argc >= 1) {
    napi_valuetype t;
    if (napi_typeof(env, argv[0], &t) == napi_ok && t == napi_number)
      napi_get_value_int64(env, argv[0], &rounds);
  }
  if (rounds < 1) rounds = 1;
  if (rounds > 1 << 20) rounds = 1 << 20;
  int64_t n = 0;
  if (!c->closed && !c->failed && !c->in_js && !c->close_pending && c->p != NULL) {
    n = dispatch_rounds(c, (int)rounds);
    if (n < 0) n = 0;
    flush_pending(c); /* drain() hands everything on now */
    if (c->close_pending) do_close(c);
  }
  CHECK(napi_create_double(env, (double)n, &out));
  return out;
}

static napi_value capture_close(napi_env env, napi_callback_info info) {
  Capture *c = unwrap_this(env, info);
  if (c == NULL) return throw_code(env, "BAD_ARGUMENT", "not a Capture");
  if (c->in_js) {
    /* Inside onBatch/onError pcap_dispatch may still be on the stack: close afterwards. */
    c->close_pending = 1;
    if (c->poll != NULL) uv_poll_stop(c->poll);
  } else {
    do_close(c);
  }
  return NULL;
}

/*
 * A gate buffer (offline/summary-gate.ts), little-endian: 0 u32 flags | 4 u32 proto | 8 u64 lo |
 * 16 u64 hi | 24 u64 best ts | 32 u32 port count | 36 u32 ports[8] | 68 u32 frames walked (out) |
 * 72 u32 useful frames without a record (out) | 80 u64 earliest and 88 u64 latest time walked (out)
 * | 128, with SUMMARY_GATE_SEEN: the 2^20-bit seen map
 * | with SUMMARY_GATE_QUIET: 16384 u32 hot bucket counts, u32 n_seq | n_ack | n_data | pad, 1024
 * u32 keys (sorted within each list) | then u32 the frame of each record (out), room for every
 * record out can hold. Reads it into *g;
 * 0 when it is too short, misaligned or names too many ports.
 */
#define GATE_HEAD 128
/* The quiet region: the hot map, u32 n_seq | n_ack | n_data | pad, the keys. */
#define GATE_QUIET_BYTES (4 * SUMMARY_GATE_HOT_BUCKETS + 16 + 4 * SUMMARY_GATE_MAX_KEYS)
static int read_gate(uint8_t *buf, size_t len, size_t max_records, SummaryGate *g) {
  if (len < GATE_HEAD || ((uintptr_t)buf & 7) != 0) return 0;
  memcpy(&g->flags, buf, 4);
  memcpy(&g->proto, buf + 4, 4);
  memcpy(&g->lo, buf + 8, 8);
  memcpy(&g->hi, buf + 16, 8);
  memcpy(&g->best_ts, buf + 24, 8);
  memcpy(&g->n_ports, buf + 32, 4);
  if (g->n_ports > SUMMARY_GATE_MAX_PORTS) return 0;
  memcpy(g->ports, buf + 36, 4 * SUMMARY_GATE_MAX_PORTS);
  size_t seen = (g->flags & SUMMARY_GATE_SEEN) ? (size_t)1 << 17 : 0;
  size_t quiet = (g->flags & SUMMARY_GATE_QUIET) ? GATE_QUIET_BYTES : 0;
  if (len < GATE_HEAD + seen + quiet + 4 * max_records) return 0;
  g->seen = seen != 0 ? (uint32_t *)(buf + GATE_HEAD) : NULL;
  g->hot = g->keys = NULL;
  g->n_seq = g->n_ack = g->n_data = 0;
  if (quiet != 0) {
    const uint8_t *q = buf + GATE_HEAD + seen;
    g->hot = (const uint32_t *)q;
    memcpy(&g->n_seq, q + 4 * SUMMARY_GATE_HOT_BUCKETS, 4);
    memcpy(&g->n_ack, q + 4 * SUMMARY_GATE_HOT_BUCKETS + 4, 4);
    memcpy(&g->n_data, q + 4 * SUMMARY_GATE_HOT_BUCKETS + 8, 4);
    if ((uint64_t)g->n_seq + g->n_ack + g->n_data > SUMMARY_GATE_MAX_KEYS) return 0;
    g->keys = (const uint32_t *)(q + 4 * SUMMARY_GATE_HOT_BUCKETS + 16);
  }
  g->frame_of = (uint32_t *)(buf + GATE_HEAD + seen + quiet);
  return 1;
}

/*
 * summarize(src, pos, end, layout, linktype, maxCaplen, ports, out[, ifaces[, gate]])
 *   -> [count, nextPos, stop, invalidTimes, invalidLengths]
 * Runs the C fast path (summary.c) over the records of src[pos, end); out receives
 * floor(out.length / 192) records at most; ports is a 65536-byte UDP port table. The pcapng
 * layouts take the Enhanced Packet Blocks of the interfaces in the table `ifaces` (24 bytes each:
 * link type, mul, div, carried (set here), if_tsoffset; summary.h), and maxCaplen is then the largest block; linktype is unused
 * (classic pcap: ifaces is undefined). With a gate (read_gate), only the frames it lets through
 * get a record; the gate receives the frames walked, the useful frames left out, the earliest and
 * latest time walked, and each record's frame. The records walked with an invalid time (classic
 * pcap) or lengths (classic pcap, pcapng) are counted (SummaryFlaws; 0 for the batch layout).
 */
static napi_value summarize(napi_env env, napi_callback_info info) {
  size_t argc = 10;
  napi_value argv[10];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 8) return throw_code(env, "BAD_ARGUMENT", "summarize needs 8 arguments");
  uint8_t *src, *ports, *out, *ifaces = NULL;
  size_t src_len, ports_len, out_len, ifaces_len = 0;
  uint32_t pos, end, layout, linktype, max_caplen;
  if (napi_get_buffer_info(env, argv[0], (void **)&src, &src_len) != napi_ok ||
      napi_get_value_uint32(env, argv[1], &pos) != napi_ok ||
      napi_get_value_uint32(env, argv[2], &end) != napi_ok ||
      napi_get_value_uint32(env, argv[3], &layout) != napi_ok ||
      napi_get_value_uint32(env, argv[4], &linktype) != napi_ok ||
      napi_get_value_uint32(env, argv[5], &max_caplen) != napi_ok ||
      napi_get_buffer_info(env, argv[6], (void **)&ports, &ports_len) != napi_ok ||
      napi_get_buffer_info(env, argv[7], (void **)&out, &out_len) != napi_ok)
    return throw_code(env, "BAD_ARGUMENT", "summarize(src, pos, end, layout, linktype, maxCaplen, ports, out)");
  int ng = layout == SUMMARY_LAYOUT_PCAPNG_LE || layout == SUMMARY_LAYOUT_PCAPNG_BE;
  if (ng && (argc < 9 ||
             napi_get_buffer_info(env, argv[8], (void **)&ifaces, &ifaces_len) != napi_ok ||
             ifaces_len % SUMMARY_NG_IFACE_BYTES != 0))
    return throw_code(env, "BAD_ARGUMENT",
                      "summarize: a pcapng layout needs an interface table (24 bytes an interface)");
  if (ports_len < 65536 || end > src_len || pos > end || layout > SUMMARY_LAYOUT_PCAPNG_BE)
    return throw_code(env, "BAD_ARGUMENT", "summarize: ports must hold 65536 bytes; pos <= end <= src.length");
  SummaryGate gate;
  SummaryGate *g = NULL;
  uint8_t *gate_buf = NULL;
  if (argc >= 10) {
    napi_valuetype type;
    CHECK(napi_typeof(env, argv[9], &type));
    size_t gate_len = 0;
    if (type != napi_undefined && type != napi_null) {
      if (napi_get_buffer_info(env, argv[9], (void **)&gate_buf, &gate_len) != napi_ok ||
          !read_gate(gate_buf, gate_len, out_len / SUMMARY_BYTES, &gate))
        return throw_code(env, "BAD_ARGUMENT",
                          "summarize: a gate is an 8-aligned buffer of 128 + 4 bytes a record (+ 128 KiB seen map, + the quiet region, at most 1024 keys)");
      g = &gate;
    }
  }
  size_t next = pos;
  int stop = 0;
  SummaryFlaws flaws = {0, 0};
  size_t n = ng ? summary_run_ng_gate(src, end, pos, layout == SUMMARY_LAYOUT_PCAPNG_LE,
                                      max_caplen, ifaces,
                                      (uint32_t)(ifaces_len / SUMMARY_NG_IFACE_BYTES), ports, out,
                                      out_len / SUMMARY_BYTES, &next, &stop, g, &flaws)
                : summary_run_gate(src, end, pos, (int)layout, linktype, max_caplen, ports, out,
                                   out_len / SUMMARY_BYTES, &next, &stop, g, &flaws);
  if (g != NULL) {
    memcpy(gate_buf + 68, &gate.frames, 4);
    memcpy(gate_buf + 72, &gate.skipped_useful, 4);
    memcpy(gate_buf + 80, &gate.ts_min, 8);
    memcpy(gate_buf + 88, &gate.ts_max, 8);
  }
  napi_value res, v;
  CHECK(napi_create_array_with_length(env, 5, &res));
  CHECK(napi_create_uint32(env, (uint32_t)n, &v));
  CHECK(napi_set_element(env, res, 0, v));
  CHECK(napi_create_uint32(env, (uint32_t)next, &v));
  CHECK(napi_set_element(env, res, 1, v));
  CHECK(napi_create_uint32(env, (uint32_t)stop, &v));
  CHECK(napi_set_element(env, res, 2, v));
  CHECK(napi_create_uint32(env, flaws.times, &v));
  CHECK(napi_set_element(env, res, 3, v));
  CHECK(napi_create_uint32(env, flaws.lengths, &v));
  CHECK(napi_set_element(env, res, 4, v));
  return res;
}

/* headersEnd(linktype, bytes, ports) -> n: where retention's headers-only cut of this frame falls
 * (summary_one's headers_end): what the capture callback keeps of it without retainPayload. */
static napi_value headers_end(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint32_t lt;
  uint8_t *b, *ports;
  size_t len, ports_len;
  if (argc < 3 || napi_get_value_uint32(env, argv[0], &lt) != napi_ok ||
      napi_get_buffer_info(env, argv[1], (void **)&b, &len) != napi_ok ||
      napi_get_buffer_info(env, argv[2], (void **)&ports, &ports_len) != napi_ok ||
      ports_len < 65536 || len > 262144)
    return throw_code(env, "BAD_ARGUMENT", "headersEnd(linktype, bytes, ports): ports of 65536 bytes");
  napi_value v;
  CHECK(napi_create_uint32(env, summary_headers_end(b, (uint32_t)len, lt, ports), &v));
  return v;
}

/*
 * wireRun(recs, i, end, ctx, linktypeValue, frame, tables, out, pos) -> [nextI, nextPos]
 * Writes records i, i+1, … of recs as EventBatch `events` entries (summary_wire.c) into out from
 * pos, while they are FAST, before end, and while out has room for one more (ctx.length +
 * SUMMARY_WIRE_MAX bytes). frame is the batch's first frame number: each record's frame is it plus
 * the record's u32 at byte 188 (the capture skips the frames folding counted); tables holds 256 transport then 256
 * tunnel-kind wire values. The caller handles the SLOW record it stops at.
 */
static napi_value wire_run(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint8_t *recs, *ctx, *tables, *out;
  size_t recs_len, ctx_len, tables_len, out_len;
  uint32_t i, end, lt, pos;
  double frame;
  if (argc < 9 || napi_get_buffer_info(env, argv[0], (void **)&recs, &recs_len) != napi_ok ||
      napi_get_value_uint32(env, argv[1], &i) != napi_ok ||
      napi_get_value_uint32(env, argv[2], &end) != napi_ok ||
      napi_get_buffer_info(env, argv[3], (void **)&ctx, &ctx_len) != napi_ok ||
      napi_get_value_uint32(env, argv[4], &lt) != napi_ok ||
      napi_get_value_double(env, argv[5], &frame) != napi_ok ||
      napi_get_buffer_info(env, argv[6], (void **)&tables, &tables_len) != napi_ok ||
      napi_get_buffer_info(env, argv[7], (void **)&out, &out_len) != napi_ok ||
      napi_get_value_uint32(env, argv[8], &pos) != napi_ok)
    return throw_code(env, "BAD_ARGUMENT",
                      "wireRun(recs, i, end, ctx, linktypeValue, frame, tables, out, pos)");
  if (tables_len < 512 || (size_t)end * SUMMARY_BYTES > recs_len || i > end || pos > out_len ||
      ctx_len > 4096 || !(frame >= 0 && frame < 9007199254740992.0))
    return throw_code(env, "BAD_ARGUMENT",
                      "wireRun: i <= end <= records in recs, pos <= out.length, tables of 512 bytes");
  uint64_t base = (uint64_t)frame;
  while (i < end && recs[(size_t)i * SUMMARY_BYTES] == 1 &&
         pos + ctx_len + SUMMARY_WIRE_MAX <= out_len) {
    const uint8_t *r = recs + (size_t)i * SUMMARY_BYTES;
    uint32_t off = (uint32_t)r[188] | ((uint32_t)r[189] << 8) | ((uint32_t)r[190] << 16) |
                   ((uint32_t)r[191] << 24);
    pos += (uint32_t)summary_wire(r, ctx, ctx_len, lt, base + off, tables, tables + 256,
                                  out + pos);
    i++;
  }
  napi_value res, v;
  CHECK(napi_create_array_with_length(env, 2, &res));
  CHECK(napi_create_uint32(env, i, &v));
  CHECK(napi_set_element(env, res, 0, v));
  CHECK(napi_create_uint32(env, pos, &v));
  CHECK(napi_set_element(env, res, 1, v));
  return res;
}

/* ---- Folder: fold.c for tests ------------------------------------------------------------------
 * new Folder(first, slots, quick = true); f.push(frame, wirelen, tsNs (bigint), linktype, ports, frameNo) ->
 * the frame's summary record (a new Buffer) when it is sent, null when it was counted;
 * f.flush() -> the pending counter records (a Buffer); f.stats() -> {folded, flows, fullSent,
 * quick (of folded, counted by fold_quick)}.
 * The capture callback runs the same summary_quick + fold_quick, else summary_one + fold_packet,
 * per frame; quick false leaves out the first two (the reference fold_quick is tested against). */
typedef struct {
  FoldTable t;
  int quick; /* fold_quick first, as the capture callback (new Folder's third argument) */
} Folder;

static void folder_finalize(napi_env env, void *data, void *hint) {
  Folder *f = (Folder *)data;
  fold_close(&f->t);
  free(f);
}

static Folder *unwrap_folder(napi_env env, napi_callback_info info, size_t *argc,
                             napi_value *argv) {
  napi_value self;
  void *data = NULL;
  if (napi_get_cb_info(env, info, argc, argv, &self, NULL) != napi_ok) return NULL;
  if (napi_unwrap(env, self, &data) != napi_ok) return NULL;
  return (Folder *)data;
}

static napi_value folder_new(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], self;
  CHECK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
  uint32_t first, slots;
  bool quick = true;
  if (argc >= 3 && napi_get_value_bool(env, argv[2], &quick) != napi_ok)
    return throw_code(env, "BAD_ARGUMENT", "new Folder(first, slots, quick: boolean)");
  if (argc < 2 || napi_get_value_uint32(env, argv[0], &first) != napi_ok ||
      napi_get_value_uint32(env, argv[1], &slots) != napi_ok || first < 1 || first > 65535 ||
      slots < 16 || slots > (1u << 20) || (slots & (slots - 1)) != 0)
    return throw_code(env, "BAD_ARGUMENT", "new Folder(first 1..65535, slots: a power of two)");
  Folder *f = calloc(1, sizeof *f);
  if (f == NULL || fold_open(&f->t, slots, first) != 0) {
    free(f);
    return throw_code(env, "ACTIVATE", "cannot allocate the flow table");
  }
  f->quick = quick;
  if (napi_wrap(env, self, f, folder_finalize, NULL, NULL) != napi_ok) {
    fold_close(&f->t);
    free(f);
    return NULL;
  }
  return self;
}

static napi_value folder_push(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6], out;
  Folder *f = unwrap_folder(env, info, &argc, argv);
  uint8_t *b, *ports;
  size_t len, ports_len;
  uint32_t wirelen, lt;
  uint64_t ts;
  bool lossless;
  double frame;
  if (f == NULL || argc < 6 || napi_get_buffer_info(env, argv[0], (void **)&b, &len) != napi_ok ||
      napi_get_value_uint32(env, argv[1], &wirelen) != napi_ok ||
      napi_get_value_bigint_uint64(env, argv[2], &ts, &lossless) != napi_ok ||
      napi_get_value_uint32(env, argv[3], &lt) != napi_ok ||
      napi_get_buffer_info(env, argv[4], (void **)&ports, &ports_len) != napi_ok ||
      ports_len < 65536 || napi_get_value_double(env, argv[5], &frame) != napi_ok ||
      len > 262144)
    return throw_code(env, "BAD_ARGUMENT",
                      "push(frame, wirelen, tsNs, linktype, ports (65536 bytes), frameNo)");
  SummaryQuick q;
  if (f->quick && summary_quick(b, (uint32_t)len, lt, ports, &q) &&
      fold_quick(&f->t, b, (uint32_t)len, wirelen, ts, frame, &q)) {
    CHECK(napi_get_null(env, &out));
    return out;
  }
  uint8_t rec[SUMMARY_BYTES];
  uint32_t hend = (uint32_t)len;
  int fast = summary_one_ex(b, (uint32_t)len, wirelen, ts, lt, ports, rec, 0, &hend, 0);
  if (fast && !fold_packet(&f->t, rec, b, (uint32_t)len, hend, frame)) {
    CHECK(napi_get_null(env, &out));
    return out;
  }
  if (fast) summary_hashes(b, (uint32_t)len, hend, rec);
  void *data;
  CHECK(napi_create_buffer_copy(env, SUMMARY_BYTES, rec, &data, &out));
  return out;
}

static napi_value folder_flush(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  Folder *f = unwrap_folder(env, info, &argc, NULL);
  if (f == NULL) return throw_code(env, "BAD_ARGUMENT", "not a Folder");
  size_t max = (size_t)f->t.pending;
  uint8_t *tmp = malloc(max * SUMMARY_BYTES + 1);
  if (tmp == NULL) return throw_code(env, "ACTIVATE", "out of memory");
  size_t n = 0;
  while (fold_pending(&f->t) && n < max) n += fold_flush(&f->t, tmp + n * SUMMARY_BYTES, max - n);
  napi_value out;
  void *data;
  napi_status st = napi_create_buffer_copy(env, n * SUMMARY_BYTES, tmp, &data, &out);
  free(tmp);
  if (st != napi_ok) return NULL;
  return out;
}

static napi_value folder_stats(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  Folder *f = unwrap_folder(env, info, &argc, NULL);
  if (f == NULL) return throw_code(env, "BAD_ARGUMENT", "not a Folder");
  napi_value out;
  CHECK(napi_create_object(env, &out));
  set_num(env, out, "folded", f->t.folded);
  set_num(env, out, "flows", f->t.flows);
  set_num(env, out, "fullSent", f->t.full_sent);
  set_num(env, out, "quick", f->t.quick);
  return out;
}

/* ---- FrameWriter ---------------------------------------------------------------------------- */

static void writer_finalize(napi_env env, void *data, void *hint) {
  FrameWriter *w = (FrameWriter *)data;
  if (w->o != NULL) frame_out_free(w->o);
  free(w);
}

/* The native object behind `this` when it carries `tag` (a FrameWriter or a SharedRing), else
 * NULL; fills argv like napi_get_cb_info. */
static void *unwrap_tagged(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv,
                           const napi_type_tag *tag) {
  napi_value self;
  void *data = NULL;
  bool tagged = false;
  if (napi_get_cb_info(env, info, argc, argv, &self, NULL) != napi_ok) return NULL;
  if (napi_check_object_type_tag(env, self, tag, &tagged) != napi_ok || !tagged) return NULL;
  if (napi_unwrap(env, self, &data) != napi_ok) return NULL;
  return data;
}

static FrameWriter *unwrap_writer(napi_env env, napi_callback_info info, size_t *argc,
                                  napi_value *argv) {
  return (FrameWriter *)unwrap_tagged(env, info, argc, argv, &FRAME_WRITER_TAG);
}

/* new FrameWriter(fd, maxQueuedBytes, ringFd?) */
static napi_value writer_new(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], self;
  CHECK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
  int32_t fd = -1, ring_fd = -1;
  int64_t max_queued = -1;
  napi_valuetype rt = napi_undefined;
  if (argc >= 3) CHECK(napi_typeof(env, argv[2], &rt));
  if (argc < 2 || napi_get_value_int32(env, argv[0], &fd) != napi_ok ||
      napi_get_value_int64(env, argv[1], &max_queued) != napi_ok || fd < 0 || max_queued < 0 ||
      (rt != napi_undefined &&
       (napi_get_value_int32(env, argv[2], &ring_fd) != napi_ok || ring_fd < 0)))
    return throw_code(env, "BAD_ARGUMENT", "usage: new FrameWriter(fd, maxQueuedBytes, ringFd?)");
  uv_loop_t *loop = NULL;
  CHECK(napi_get_uv_event_loop(env, &loop));
  int err = 0;
  FrameOut *o = frame_out_new(loop, fd, (size_t)max_queued, &err);
  if (o == NULL) {
    char msg[160];
    snprintf(msg, sizeof msg, "cannot write frames to fd %d: %s", fd,
             err < 0 ? uv_strerror(err) : strerror(err));
    return throw_code(env, "ACTIVATE", msg);
  }
  if (ring_fd >= 0) {
    int rerr = frame_out_attach_ring(o, ring_fd);
    if (rerr != 0) {
      frame_out_free(o);
      char msg[160];
      snprintf(msg, sizeof msg, "fd %d is not a frame ring: %s", ring_fd,
               rerr == EINVAL ? "wrong size or magic" : strerror(rerr));
      return throw_code(env, "BAD_ARGUMENT", msg);
    }
  }
  FrameWriter *w = calloc(1, sizeof *w);
  if (w == NULL) {
    frame_out_free(o);
    return throw_code(env, "ACTIVATE", "out of memory");
  }
  w->o = o;
  if (napi_wrap(env, self, w, writer_finalize, NULL, NULL) != napi_ok ||
      napi_type_tag_object(env, self, &FRAME_WRITER_TAG) != napi_ok) {
    frame_out_free(o);
    free(w);
    return throw_code(env, "ACTIVATE", "cannot set up the FrameWriter");
  }
  return self;
}

/* w.write(buf, droppable) -> true (written or queued) | false (dropped, or the writer failed) */
static napi_value writer_write(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], res;
  FrameWriter *w = unwrap_writer(env, info, &argc, argv);
  if (w == NULL) return throw_code(env, "BAD_ARGUMENT", "not a FrameWriter");
  void *data = NULL;
  size_t len = 0;
  bool droppable = false;
  if (argc < 1 || napi_get_buffer_info(env, argv[0], &data, &len) != napi_ok)
    return throw_code(env, "BAD_ARGUMENT", "write(buffer, droppable)");
  if (argc >= 2) napi_get_value_bool(env, argv[1], &droppable);
  int rc = FRAME_OUT_FAILED;
  if (w->o != NULL) {
    struct iovec iov = {data, len};
    rc = frame_out_writev(w->o, &iov, 1, droppable);
  }
  CHECK(napi_get_boolean(env, rc == FRAME_OUT_WRITTEN, &res));
  return res;
}

/* w.pending() -> bytes accepted but not yet taken by the fd */
static napi_value writer_pending(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  napi_value res;
  FrameWriter *w = unwrap_writer(env, info, &argc, NULL);
  if (w == NULL) return throw_code(env, "BAD_ARGUMENT", "not a FrameWriter");
  CHECK(napi_create_double(env, w->o != NULL ? (double)frame_out_pending(w->o) : 0, &res));
  return res;
}

/* w.error() -> null, or why writing stopped (e.g. the parent closed its end: EPIPE) */
static napi_value writer_error(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  napi_value res;
  FrameWriter *w = unwrap_writer(env, info, &argc, NULL);
  if (w == NULL) return throw_code(env, "BAD_ARGUMENT", "not a FrameWriter");
  int err = w->o != NULL ? frame_out_error(w->o) : EBADF;
  if (err == 0) {
    CHECK(napi_get_null(env, &res));
  } else {
    CHECK(napi_create_string_utf8(env, strerror(err), NAPI_AUTO_LENGTH, &res));
  }
  return res;
}

/* w.close(): stops writing (queued bytes are discarded); the fd stays open. Idempotent. */
static napi_value writer_close(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  FrameWriter *w = unwrap_writer(env, info, &argc, NULL);
  if (w == NULL) return throw_code(env, "BAD_ARGUMENT", "not a FrameWriter");
  if (w->o != NULL) frame_out_free(w->o);
  w->o = NULL;
  return NULL;
}

/* ---- SharedRing ----------------------------------------------------------------------------- */

static void ring_buffer_finalize(napi_env env, void *data, void *hint) {
  frame_ring_free((FrameRing *)hint);
}

static void ring_finalize(napi_env env, void *data, void *hint) {
  SharedRing *s = (SharedRing *)data;
  int64_t left = 0;
  if (s->ext != 0) napi_adjust_external_memory(env, -s->ext, &left);
  if (s->fd >= 0) close(s->fd);
  if (s->buf_ref != NULL) napi_delete_reference(env, s->buf_ref);
  free(s);
}

static SharedRing *unwrap_ring(napi_env env, napi_callback_info info, size_t *argc,
                               napi_value *argv) {
  return (SharedRing *)unwrap_tagged(env, info, argc, argv, &SHARED_RING_TAG);
}

static void ring_close_fd(SharedRing *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

/* new SharedRing(bytes) */
static napi_value ring_new(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], self, buf, fdv, sizev;
  CHECK(napi_get_cb_info(env, info, &argc, argv, &self, NULL));
  int64_t bytes = -1;
  if (argc < 1 || napi_get_value_int64(env, argv[0], &bytes) != napi_ok ||
      bytes < (int64_t)FRAME_RING_MIN || bytes > (int64_t)FRAME_RING_MAX) {
    char msg[120];
    snprintf(msg, sizeof msg, "usage: new SharedRing(bytes), %u ≤ bytes ≤ %u", FRAME_RING_MIN,
             FRAME_RING_MAX);
    return throw_code(env, "BAD_ARGUMENT", msg);
  }
  int fd = -1, err = 0;
  FrameRing *r = frame_ring_create((size_t)bytes, &fd, &err);
  if (r == NULL) {
    char msg[160];
    snprintf(msg, sizeof msg, "cannot create the shared frame ring: %s", strerror(err));
    return throw_code(env, "ACTIVATE", msg);
  }
  SharedRing *s = calloc(1, sizeof *s);
  if (s == NULL) {
    close(fd);
    frame_ring_free(r);
    return throw_code(env, "ACTIVATE", "out of memory");
  }
  s->r = r;
  s->fd = fd;
  /* From here the Buffer owns the mapping (its finalizer unmaps it). */
  if (napi_create_external_buffer(env, frame_ring_size(r), frame_ring_data(r),
                                  ring_buffer_finalize, r, &buf) != napi_ok) {
    close(fd);
    frame_ring_free(r);
    free(s);
    return throw_code(env, "ACTIVATE", "cannot expose the shared frame ring");
  }
  if (napi_create_reference(env, buf, 1, &s->buf_ref) != napi_ok ||
      napi_create_int32(env, fd, &fdv) != napi_ok ||
      napi_create_double(env, (double)frame_ring_size(r), &sizev) != napi_ok) {
    close(fd);
    free(s);
    return throw_code(env, "ACTIVATE", "cannot set up the SharedRing");
  }
  /* Tell V8 what the mapping weighs, so that a dropped ring is collected in good time. */
  int64_t total = 0;
  if (napi_adjust_external_memory(env, (int64_t)frame_ring_size(r), &total) == napi_ok)
    s->ext = (int64_t)frame_ring_size(r);
  napi_property_descriptor props[] = {
      {"buffer", NULL, NULL, NULL, NULL, buf, napi_enumerable, NULL},
      {"fd", NULL, NULL, NULL, NULL, fdv, napi_enumerable, NULL},
      {"size", NULL, NULL, NULL, NULL, sizev, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, self, 3, props) != napi_ok ||
      napi_wrap(env, self, s, ring_finalize, NULL, NULL) != napi_ok ||
      napi_type_tag_object(env, self, &SHARED_RING_TAG) != napi_ok) {
    close(fd);
    napi_delete_reference(env, s->buf_ref);
    free(s);
    return throw_code(env, "ACTIVATE", "cannot set up the SharedRing");
  }
  return self;
}

/* r.release(end): the frames before `end` (a notice's end) are read; never moves back. */
static napi_value ring_release(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  SharedRing *s = unwrap_ring(env, info, &argc, argv);
  if (s == NULL) return throw_code(env, "BAD_ARGUMENT", "not a SharedRing");
  double end = -1;
  if (argc < 1 || napi_get_value_double(env, argv[0], &end) != napi_ok || !(end >= 0) ||
      end > 9007199254740991.0)
    return throw_code(env, "BAD_ARGUMENT", "release(end): end is a byte count ≥ 0");
  if (s->r != NULL) frame_ring_release(s->r, (uint64_t)end);
  return NULL;
}

/* r.dispose(): unmaps the ring now — r.buffer and every view of it become empty (detached), so
 * nothing can read freed memory — and closes r.fd. For when the worker has exited and its last
 * frames are read; without it the mapping goes when r.buffer is collected. Idempotent. */
static napi_value ring_dispose(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  SharedRing *s = unwrap_ring(env, info, &argc, NULL);
  if (s == NULL) return throw_code(env, "BAD_ARGUMENT", "not a SharedRing");
  ring_close_fd(s);
  if (s->r == NULL) return NULL;
  napi_value buf, ab;
  napi_typedarray_type type;
  size_t len = 0, off = 0;
  void *data = NULL;
  if (napi_get_reference_value(env, s->buf_ref, &buf) != napi_ok ||
      napi_get_typedarray_info(env, buf, &type, &len, &data, &ab, &off) != napi_ok)
    return throw_code(env, "ACTIVATE", "cannot reach the ring's buffer");
  /* Unmap first, then detach: detaching may free the struct through the Buffer's finalizer. */
  frame_ring_unmap(s->r);
  s->r = NULL;
  if (napi_detach_arraybuffer(env, ab) != napi_ok)
    return throw_code(env, "ACTIVATE", "cannot detach the ring's buffer");
  int64_t left = 0;
  if (s->ext != 0) napi_adjust_external_memory(env, -s->ext, &left);
  s->ext = 0;
  return NULL;
}

/* r.close(): closes the parent's copy of the fd (after the worker inherited it). Idempotent. */
static napi_value ring_close(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  SharedRing *s = unwrap_ring(env, info, &argc, NULL);
  if (s == NULL) return throw_code(env, "BAD_ARGUMENT", "not a SharedRing");
  ring_close_fd(s);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor methods[] = {
      {"stats", NULL, capture_stats, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, capture_close, NULL, NULL, NULL, napi_default, NULL},
      {"drain", NULL, capture_drain, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_value cls, version, libver;
  CHECK(napi_define_class(env, "Capture", NAPI_AUTO_LENGTH, capture_new, NULL, 3, methods, &cls));
  CHECK(napi_set_named_property(env, exports, "Capture", cls));
  CHECK(napi_create_uint32(env, ADDON_VERSION, &version));
  CHECK(napi_set_named_property(env, exports, "version", version));
  CHECK(napi_create_string_utf8(env, pcap_lib_version(), NAPI_AUTO_LENGTH, &libver));
  CHECK(napi_set_named_property(env, exports, "libpcapVersion", libver));
  napi_property_descriptor wmethods[] = {
      {"write", NULL, writer_write, NULL, NULL, NULL, napi_default, NULL},
      {"pending", NULL, writer_pending, NULL, NULL, NULL, napi_default, NULL},
      {"error", NULL, writer_error, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, writer_close, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_value wcls;
  CHECK(napi_define_class(env, "FrameWriter", NAPI_AUTO_LENGTH, writer_new, NULL, 4, wmethods,
                          &wcls));
  CHECK(napi_set_named_property(env, exports, "FrameWriter", wcls));
  napi_property_descriptor rmethods[] = {
      {"release", NULL, ring_release, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, ring_close, NULL, NULL, NULL, napi_default, NULL},
      {"dispose", NULL, ring_dispose, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_value rcls;
  CHECK(napi_define_class(env, "SharedRing", NAPI_AUTO_LENGTH, ring_new, NULL, 3, rmethods,
                          &rcls));
  CHECK(napi_set_named_property(env, exports, "SharedRing", rcls));
  napi_property_descriptor fmethods[] = {
      {"push", NULL, folder_push, NULL, NULL, NULL, napi_default, NULL},
      {"flush", NULL, folder_flush, NULL, NULL, NULL, napi_default, NULL},
      {"stats", NULL, folder_stats, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_value fcls;
  CHECK(napi_define_class(env, "Folder", NAPI_AUTO_LENGTH, folder_new, NULL, 3, fmethods,
                          &fcls));
  CHECK(napi_set_named_property(env, exports, "Folder", fcls));
  napi_value sfn, sbytes;
  napi_value wfn;
  CHECK(napi_create_function(env, "wireRun", NAPI_AUTO_LENGTH, wire_run, NULL, &wfn));
  CHECK(napi_set_named_property(env, exports, "wireRun", wfn));
  napi_value hfn;
  CHECK(napi_create_function(env, "headersEnd", NAPI_AUTO_LENGTH, headers_end, NULL, &hfn));
  CHECK(napi_set_named_property(env, exports, "headersEnd", hfn));
  CHECK(napi_create_function(env, "summarize", NAPI_AUTO_LENGTH, summarize, NULL, &sfn));
  CHECK(napi_set_named_property(env, exports, "summarize", sfn));
  CHECK(napi_create_uint32(env, SUMMARY_BYTES, &sbytes));
  CHECK(napi_set_named_property(env, exports, "summaryBytes", sbytes));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)

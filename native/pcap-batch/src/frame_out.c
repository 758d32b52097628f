/*
 * frame_out: the capture worker's one writer of frames to its parent.
 *
 * Why in C: a capture batch used to cross into JavaScript only to be copied into a frame and
 * handed to process.stdout, which costs a JS call, a copy of every record and a libuv write
 * request per batch (perf: ~30 % of the worker's time at 300 k pps). Here the capture writes its
 * batch as one frame with writev(2) straight from its own buffers, inside the poll callback;
 * JavaScript writes its (rare) control frames through the same writer, so frames never interleave.
 *
 *   frame_out_writev ──► queue empty? ── yes ──► writev(fd) ── all taken ──► done (no copy)
 *                            │ no                     │ partly / EAGAIN
 *                            ▼                        ▼
 *                  droppable and queued > max ──► dropped (counted by the caller)
 *                            │ else
 *                            ▼
 *                      append to queue ◄──────────────┘
 *                            │
 *                  uv_poll UV_WRITABLE ──► write(fd) from the queue until empty, then stop polling
 *
 * With a shared ring attached (frame_out_attach_ring, frame_ring.c), a droppable frame (a capture
 * batch) is copied into the ring instead and only a 21-byte notice takes the path above; the
 * ring's free space is then the bound.
 *
 * The fd is the worker's stdout (a socket or pipe to the parent); JavaScript must not open a
 * stream on it as well (libuv cannot poll one fd twice). A write error (EPIPE: the parent went
 * away) stops all writing and is reported by frame_out_error; SIGPIPE is ignored by Node.
 */
#include "frame_out.h"

#include "frame_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

struct FrameOut {
  int fd;
  uv_poll_t *poll; /* freed in its close callback */
  int polling;
  int error;
  size_t max_queued;
  uint8_t *q; /* queued bytes are q[start, end) */
  size_t start, end, cap;
  FrameRing *ring; /* droppable frames go here when set */
};

static void free_handle(uv_handle_t *h) {
  FrameOut *o = (FrameOut *)h->data;
  frame_ring_free(o->ring);
  free(o->q);
  free(o);
  free(h);
}

static void stop_polling(FrameOut *o) {
  if (o->polling) {
    uv_poll_stop(o->poll);
    o->polling = 0;
  }
}

static void fail(FrameOut *o, int err) {
  o->error = err != 0 ? err : EIO;
  o->start = o->end = 0;
  stop_polling(o);
}

static void on_writable(uv_poll_t *h, int status, int events) {
  FrameOut *o = (FrameOut *)h->data;
  if (status < 0) {
    fail(o, -status);
    return;
  }
  while (o->start < o->end) {
    ssize_t w = write(o->fd, o->q + o->start, o->end - o->start);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return; /* still full: wait again */
      fail(o, errno);
      return;
    }
    o->start += (size_t)w;
  }
  o->start = o->end = 0;
  stop_polling(o);
}

/* Room for n more bytes at the queue's end (moves the queued bytes to the front, or grows). */
static int reserve(FrameOut *o, size_t n) {
  if (o->end + n <= o->cap) return 1;
  size_t used = o->end - o->start;
  if (o->start > 0) {
    memmove(o->q, o->q + o->start, used);
    o->start = 0;
    o->end = used;
    if (used + n <= o->cap) return 1;
  }
  size_t cap = o->cap < 65536 ? 65536 : o->cap;
  while (cap < used + n) cap *= 2;
  uint8_t *q = realloc(o->q, cap);
  if (q == NULL) return 0;
  o->q = q;
  o->cap = cap;
  return 1;
}

FrameOut *frame_out_new(uv_loop_t *loop, int fd, size_t max_queued, int *err) {
  FrameOut *o = calloc(1, sizeof *o);
  uv_poll_t *poll = calloc(1, sizeof *poll);
  if (o == NULL || poll == NULL) {
    free(o);
    free(poll);
    *err = ENOMEM;
    return NULL;
  }
  /* uv_poll_init makes the fd non-blocking. */
  int rc = uv_poll_init(loop, poll, fd);
  if (rc != 0) {
    free(o);
    free(poll);
    *err = rc;
    return NULL;
  }
  poll->data = o;
  /* Room for a few whole batches in the kernel: a ring block of records (~270 KB at 1,400 packets)
   * exceeds the default socket buffer (~208 KB), so every batch would be a partial write, a copy
   * into the queue and a wait for POLLOUT. Best effort: SO_SNDBUFFORCE needs CAP_NET_ADMIN (the
   * worker has it), SO_SNDBUF is capped by net.core.wmem_max; a pipe takes F_SETPIPE_SZ. */
  int want = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof want) != 0 &&
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want) != 0) {
#ifdef F_SETPIPE_SZ
    (void)fcntl(fd, F_SETPIPE_SZ, 1 << 20);
#endif
  }
  o->fd = fd;
  o->poll = poll;
  o->max_queued = max_queued;
  return o;
}

int frame_out_attach_ring(FrameOut *o, int ring_fd) {
  int err = 0;
  FrameRing *r = frame_ring_open(ring_fd, &err);
  if (r == NULL) return err;
  frame_ring_free(o->ring);
  o->ring = r;
  return 0;
}

int frame_out_writev(FrameOut *o, const struct iovec *iov, int n, int droppable) {
  if (o->error != 0) return FRAME_OUT_FAILED;
  uint8_t note[FRAME_RING_NOTICE_BYTES]; /* outlives the block: iov points at it */
  struct iovec niov = {note, sizeof note};
  if (droppable && o->ring != NULL) {
    uint32_t offset = 0;
    uint64_t end = 0;
    if (!frame_ring_put(o->ring, iov, n, &offset, &end)) return FRAME_OUT_DROPPED;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += iov[i].iov_len;
    frame_ring_notice(note, offset, (uint32_t)total, end);
    iov = &niov;
    n = 1;
    droppable = 0; /* the frame is in the ring: its notice must reach the parent */
  }
  size_t total = 0;
  for (int i = 0; i < n; i++) total += iov[i].iov_len;
  size_t done = 0;
  if (o->start == o->end) {
    for (;;) {
      ssize_t w = writev(o->fd, iov, n);
      if (w >= 0) {
        done = (size_t)w;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      fail(o, errno);
      return FRAME_OUT_FAILED;
    }
    if (done == total) return FRAME_OUT_WRITTEN;
  } else if (droppable && o->end - o->start > o->max_queued) {
    return FRAME_OUT_DROPPED;
  }
  /* Queue what the fd did not take (a partly written frame is always finished). */
  if (!reserve(o, total - done)) {
    if (done > 0) {
      fail(o, ENOMEM); /* half a frame on the wire cannot be taken back */
      return FRAME_OUT_FAILED;
    }
    return FRAME_OUT_DROPPED;
  }
  size_t skip = done;
  for (int i = 0; i < n; i++) {
    size_t len = iov[i].iov_len;
    if (skip >= len) {
      skip -= len;
      continue;
    }
    memcpy(o->q + o->end, (const uint8_t *)iov[i].iov_base + skip, len - skip);
    o->end += len - skip;
    skip = 0;
  }
  if (!o->polling) {
    int rc = uv_poll_start(o->poll, UV_WRITABLE, on_writable);
    if (rc != 0) {
      fail(o, -rc);
      return FRAME_OUT_FAILED;
    }
    o->polling = 1;
  }
  return FRAME_OUT_WRITTEN;
}

size_t frame_out_pending(const FrameOut *o) { return o->end - o->start; }

int frame_out_error(const FrameOut *o) { return o->error; }

void frame_out_free(FrameOut *o) {
  stop_polling(o);
  uv_close((uv_handle_t *)o->poll, free_handle);
}

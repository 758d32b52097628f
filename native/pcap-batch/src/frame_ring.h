/*
 * frame_ring: a shared-memory ring that carries the capture worker's batch frames to its parent
 * (see frame_ring.c).
 */
#ifndef HOPTRACE_FRAME_RING_H
#define HOPTRACE_FRAME_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Bytes before the data area: the header page (magic, size, the consumer's tail). */
#define FRAME_RING_HEAD 4096u
/* Smallest and largest data area. */
#define FRAME_RING_MIN (64u << 10)
#define FRAME_RING_MAX (1u << 30)
/* Frame type of the notice that stands for a frame in the ring (worker-frames.ts FRAME_RING). */
#define FRAME_RING_NOTICE_TYPE 5
/* A notice on the wire: u32 BE length (17) | type | u32 offset | u32 length | u64 end (LE). */
#define FRAME_RING_NOTICE_BYTES 21

typedef struct FrameRing FrameRing;

/* Parent: a new ring of `size` data bytes in a memfd (close-on-exec; pass it to the worker as a
 * stdio fd); NULL with *err = errno. *fd_out is the memfd. */
FrameRing *frame_ring_create(size_t size, int *fd_out, int *err);
/* Worker: maps the parent's ring from fd (the fd may be closed afterwards); NULL with *err =
 * errno, or EINVAL when it is not a ring. */
FrameRing *frame_ring_open(int fd, int *err);
/* The data area and its size. */
uint8_t *frame_ring_data(const FrameRing *r);
size_t frame_ring_size(const FrameRing *r);
/*
 * Producer: copies iov[0..n) into the ring as one contiguous frame (never split across the end:
 * the rest of the area is skipped instead). Returns 1 and the frame's offset and end (the
 * monotonic byte count the consumer releases to), or 0 when the free space is too small.
 */
int frame_ring_put(FrameRing *r, const struct iovec *iov, int n, uint32_t *offset, uint64_t *end);
/* The notice for a frame put at offset with `length` bytes ending at `end` (FRAME_RING_NOTICE_BYTES). */
void frame_ring_notice(uint8_t *out, uint32_t offset, uint32_t length, uint64_t end);
/* Consumer: everything before `end` is read; the producer may reuse it (never moves back). */
void frame_ring_release(FrameRing *r, uint64_t end);
/* Unmaps the ring now (the struct stays; release() then does nothing). */
void frame_ring_unmap(FrameRing *r);
/* Unmaps the ring (unless already) and frees the struct. */
void frame_ring_free(FrameRing *r);

#endif

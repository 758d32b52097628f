/*
 * frame_out: the capture worker's one writer of frames to its parent (see frame_out.c).
 */
#ifndef HOPTRACE_FRAME_OUT_H
#define HOPTRACE_FRAME_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <uv.h>

typedef struct FrameOut FrameOut;

/* What frame_out_writev did with a frame. */
enum { FRAME_OUT_WRITTEN = 1, FRAME_OUT_DROPPED = 0, FRAME_OUT_FAILED = -1 };

/* A writer on fd (set non-blocking); NULL with *err set (errno or a uv error) on failure. */
FrameOut *frame_out_new(uv_loop_t *loop, int fd, size_t max_queued, int *err);
/*
 * Writes iov[0..n) as one frame, whole or not at all: straight to the fd when nothing is queued
 * (no copy unless the fd takes only part of it), else appended to the queue. A droppable frame is
 * dropped (FRAME_OUT_DROPPED) when the bytes still queued exceed max_queued; others always queue.
 */
int frame_out_writev(FrameOut *o, const struct iovec *iov, int n, int droppable);
/* From now on droppable frames go through the shared ring mapped from ring_fd (frame_ring.c):
 * each is copied there and only its notice is written to the fd; a full ring drops the frame.
 * Returns 0, or an errno (the writer is unchanged). */
int frame_out_attach_ring(FrameOut *o, int ring_fd);
/* Bytes accepted but not yet taken by the fd. */
size_t frame_out_pending(const FrameOut *o);
/* 0, or the errno of the write that failed (the peer went away): nothing more is written. */
int frame_out_error(const FrameOut *o);
/* Stops polling and frees the writer once libuv has closed its handle. The fd stays open. */
void frame_out_free(FrameOut *o);

#endif

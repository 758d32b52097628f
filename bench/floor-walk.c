/*
 * floor-walk.c — the least a program that reads classic pcap files and looks at every record does,
 * without Node: `floor-walk FILE...` reads each file with 128 KiB read(2)s into one buffer (as cat
 * does; the size that stays in the core's cache) and walks its record headers, nothing decoded,
 * then prints the number of frames. bench/large-files.ts runs it beside `cat` and `hoptrace
 * analyze`: what is left between it and cat is the walk itself — one dependent load per record —
 * on one core. `floor-walk -2 FIRST LATER...` walks the files the way analyze must order them on
 * two cores: the first file alone (its request is what the later files are read for), then the
 * later ones split between two threads — the least any such analysis of every record takes here.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (128 << 10)

/* Walks one file's record headers; returns its frames, or -1 (the error printed). */
static long long walk_file(const char *path, uint8_t *b) {
  long long frames = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    return -1;
  }
  size_t carry = 0, skip = 24; /* the file header */
  for (;;) {
    ssize_t got = read(fd, b + carry, 2 * CHUNK - carry);
    if (got < 0) {
      perror(path);
      close(fd);
      return -1;
    }
    size_t end = carry + (size_t)got, p = 0;
    if (skip > 0) {
      size_t k = skip < end ? skip : end;
      p = k;
      skip -= k;
    }
    while (p + 16 <= end) {
      uint32_t caplen;
      memcpy(&caplen, b + p + 8, 4);
      if ((size_t)caplen > 2 * CHUNK - 16) {
        fprintf(stderr, "%s: a record of %u bytes\n", path, caplen);
        close(fd);
        return -1;
      }
      if (p + 16 + caplen > end) break;
      p += 16 + caplen;
      frames++;
    }
    if (got == 0) break;
    memmove(b, b + p, end - p);
    carry = end - p;
  }
  close(fd);
  return frames;
}

/* One thread's share of the later files: every other one from `first`. */
typedef struct {
  char **files;
  int n, first;
  long long frames;
} Share;

static void *walk_share(void *arg) {
  Share *s = (Share *)arg;
  uint8_t *b = malloc(2 * CHUNK);
  s->frames = b == NULL ? -1 : 0;
  for (int i = s->first; b != NULL && i < s->n; i += 2) {
    long long f = walk_file(s->files[i], b);
    if (f < 0) {
      s->frames = -1;
      break;
    }
    s->frames += f;
  }
  free(b);
  return NULL;
}

int main(int argc, char **argv) {
  int two = argc > 1 && strcmp(argv[1], "-2") == 0;
  char **files = argv + 1 + two;
  int n = argc - 1 - two;
  uint8_t *b = malloc(2 * CHUNK);
  if (b == NULL || n < 1) return 2;
  long long frames = 0;
  if (!two) {
    for (int i = 0; i < n; i++) {
      long long f = walk_file(files[i], b);
      if (f < 0) return 1;
      frames += f;
    }
  } else {
    long long f = walk_file(files[0], b);
    if (f < 0) return 1;
    frames = f;
    Share s[2] = {{files + 1, n - 1, 0, 0}, {files + 1, n - 1, 1, 0}};
    pthread_t t;
    if (pthread_create(&t, NULL, walk_share, &s[1]) != 0) return 2;
    walk_share(&s[0]);
    pthread_join(t, NULL);
    if (s[0].frames < 0 || s[1].frames < 0) return 1;
    frames += s[0].frames + s[1].frames;
  }
  free(b);
  printf("%llu\n", (unsigned long long)frames);
  return 0;
}

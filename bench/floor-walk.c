/*
 * floor-walk.c — the least a program that reads classic pcap files and looks at every record does,
 * without Node: `floor-walk FILE...` reads each file with 128 KiB read(2)s into one buffer (as cat
 * does; the size that stays in the core's cache) and walks its record headers, nothing decoded,
 * then prints the number of frames. bench/large-files.ts runs it beside `cat` and `hoptrace
 * analyze`: what is left between it and cat is the walk itself — one dependent load per record —
 * on one core.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (128 << 10)

int main(int argc, char **argv) {
  uint8_t *b = malloc(2 * CHUNK);
  if (b == NULL) return 2;
  uint64_t frames = 0;
  for (int i = 1; i < argc; i++) {
    int fd = open(argv[i], O_RDONLY);
    if (fd < 0) {
      perror(argv[i]);
      return 1;
    }
    size_t carry = 0, skip = 24; /* the file header */
    for (;;) {
      ssize_t got = read(fd, b + carry, 2 * CHUNK - carry);
      if (got < 0) {
        perror(argv[i]);
        return 1;
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
          fprintf(stderr, "%s: a record of %u bytes\n", argv[i], caplen);
          return 1;
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
  }
  printf("%llu\n", (unsigned long long)frames);
  return 0;
}

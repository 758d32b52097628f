{
  "targets": [
    {
      "target_name": "pcap_batch",
      "sources": ["src/pcap_batch.c", "src/summary.c", "src/frame_out.c", "src/summary_wire.c", "src/frame_ring.c", "src/retain.c", "src/headers.c", "src/fold.c"],
      "cflags": ["-std=gnu11", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-override-init"],
      "defines": ["NAPI_VERSION=8"],
      "libraries": ["-lpcap"]
    }
  ]
}

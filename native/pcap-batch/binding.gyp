{
  "targets": [
    {
      "target_name": "pcap_batch",
      "sources": ["src/pcap_batch.c"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "defines": ["NAPI_VERSION=8"],
      "libraries": ["-lpcap"]
    }
  ]
}

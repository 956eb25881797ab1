// libdeflate (Debian's libdeflate-dev): whole-buffer gzip and a CRC-32 (zlib's polynomial) that
// use the CPU's carry-less multiply — the journal's checksum and the InfluxDB sink's gzip.
#include <libdeflate.h>

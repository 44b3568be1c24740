/*
 * sha256-chain: the canary job of gpufarm (ARCHITECTURE.md sections 8 and 9).
 *
 *   sha256-chain <iterations>
 *
 * Writes sha256^n(GF_JOB_ID) to /output/result.txt (or to the file named by GF_CANARY_OUTPUT,
 * for tests outside a container), where n = <iterations> >= 1 and, precisely:
 *
 *   d_1 = SHA-256(the bytes of the environment variable GF_JOB_ID, as given, no terminator)
 *   d_k = SHA-256(d_{k-1})  for k = 2..n, hashing the RAW 32-byte digest (not its hex text)
 *
 * The file holds d_n as 64 lower-case hex digits followed by one newline ("\n"), 65 bytes.
 * The control plane recomputes it the same way (a JavaScript version:
 * agent/src/runtime/canary.ts `canaryResult`). Exit codes: 0 written, 2 bad usage or a missing
 * GF_JOB_ID, 1 an I/O error. A progress line goes to stderr so a run is visible in the logs.
 *
 * Built static (gcc -O2 -static ... -lcrypto) so the image holds this one file.
 */
#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: sha256-chain <iterations>\n");
    return 2;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long n = strtoull(argv[1], &end, 10);
  if (errno != 0 || end == argv[1] || *end != '\0' || argv[1][0] == '-' || n < 1) {
    fprintf(stderr, "sha256-chain: iterations must be an integer >= 1, got \"%s\"\n", argv[1]);
    return 2;
  }
  const char *job = getenv("GF_JOB_ID");
  if (job == NULL) {
    fprintf(stderr, "sha256-chain: GF_JOB_ID is not set\n");
    return 2;
  }
  const char *path = getenv("GF_CANARY_OUTPUT");
  if (path == NULL || path[0] == '\0') path = "/output/result.txt";

  fprintf(stderr, "sha256-chain: %llu iterations of SHA-256 over GF_JOB_ID\n", n);
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256((const unsigned char *)job, strlen(job), d);
  for (unsigned long long k = 1; k < n; k++) SHA256(d, sizeof d, d);

  char hex[2 * SHA256_DIGEST_LENGTH + 2];
  for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  hex[2 * SHA256_DIGEST_LENGTH] = '\n';
  hex[2 * SHA256_DIGEST_LENGTH + 1] = '\0';

  FILE *f = fopen(path, "w");
  if (f == NULL || fputs(hex, f) == EOF || fclose(f) != 0) {
    fprintf(stderr, "sha256-chain: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  printf("%s", hex);
  return 0;
}

/* main() for fuzz targets outside libFuzzer: feeds each file named on the command line to
 * LLVMFuzzerTestOneInput once (make test replays tests/fuzz/regress/ with it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			return 1;
		}
		size_t cap = 1 << 16, n = 0, got;
		uint8_t *buf = malloc(cap);
		while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
			n += got;
			if (n == cap)
				buf = realloc(buf, cap *= 2);
		}
		fclose(f);
		if (!buf)
			return 1;
		LLVMFuzzerTestOneInput(buf, n);
		free(buf);
		printf("ok - replay %s\n", argv[i]);
	}
	return 0;
}

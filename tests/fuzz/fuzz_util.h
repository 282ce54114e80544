/* Shared by the fuzz targets: put the input in a file, since the loaders read files. */
#ifndef TW_FUZZ_UTIL_H
#define TW_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* Writes data to /tmp/twin-fuzz-PID-TAG.json and returns the path (static per tag). */
static inline const char *fuzz_write_file(const char *tag, const uint8_t *data, size_t size,
					  char *path, size_t len)
{
	snprintf(path, len, "/tmp/twin-fuzz-%d-%s.json", (int)getpid(), tag);
	FILE *f = fopen(path, "wb");
	if (!f)
		return NULL;
	fwrite(data, 1, size, f);
	fclose(f);
	return path;
}

#endif

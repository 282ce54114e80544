/* Fuzz target: the Kineto (PyTorch profiler) JSON importer, then the analysis and the Chrome
 * exporter on whatever imports. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "profile/profile.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[128];
	if (!fuzz_write_file("kineto", data, size, path, sizeof(path)))
		return 0;
	struct trace t;
	trace_init(&t, TRACE_KIND_IMPORT, 1);
	struct tw_err err = {0};
	if (prof_import_kineto(path, -1, &t, &err) == TW_OK) {
		trace_sort(&t);
		struct prof_analysis a;
		tw_err_clear(&err);
		prof_analyze(&t, &a, &err);
		FILE *f = fopen("/dev/null", "w");
		if (f) {
			tw_err_clear(&err);
			prof_export_chrome(&t, f, &err);
			fclose(f);
		}
	}
	trace_release(&t);
	unlink(path);
	return 0;
}

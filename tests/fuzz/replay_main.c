/* Plain driver for libFuzzer harnesses: feeds every file under the given
 * paths (files or folders, not recursive) to LLVMFuzzerTestOneInput once.
 * Lets gcc builds, ASan builds included, check the seed corpus on every
 * test run; real fuzzing uses -fsanitize=fuzzer with clang. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long size;

	if (!f) {
		perror(path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(size > 0 ? (size_t)size : 1);
	if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)size);
	free(buf);
	return 0;
}

static int replay_path(const char *path, int *count)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	char child[4096];

	if (stat(path, &st) != 0) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path);
	}
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, de->d_name);
		if (stat(child, &st) == 0 && S_ISREG(st.st_mode)) {
			(*count)++;
			if (replay_file(child) != 0) {
				closedir(d);
				return -1;
			}
		}
	}
	closedir(d);
	return 0;
}

int main(int argc, char **argv)
{
	int count = 0;

	for (int i = 1; i < argc; i++)
		if (replay_path(argv[i], &count) != 0)
			return 1;
	if (count == 0) {
		fprintf(stderr, "no inputs replayed\n");
		return 1;
	}
	printf("replayed %d inputs\n", count);
	return 0;
}

/* replay_main: the driver a fuzz target links with when no fuzzing engine is
 * selected.  Every argument is a file or a directory; each regular file (a
 * directory's files in name order, not recursively) is read whole and handed
 * to LLVMFuzzerTestOneInput once.  The target aborts on a failed check, so
 * replaying the committed corpus in the unit suite keeps the targets honest
 * without clang. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads PATH and runs the target on it.  0, or -1 with the reason printed. */
static int replay_file(const char *path)
{
    FILE *f = NULL;
    uint8_t *data = NULL;
    struct stat st;
    int rc = -1;

    f = fopen(path, "rb");
    if (f == NULL || fstat(fileno(f), &st) < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        goto done;
    }
    /* One spare byte so an empty file still gets a valid pointer. */
    data = malloc((size_t)st.st_size + 1);
    if (data == NULL) {
        fprintf(stderr, "%s: out of memory\n", path);
        goto done;
    }
    if (fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        fprintf(stderr, "%s: short read\n", path);
        goto done;
    }
    LLVMFuzzerTestOneInput(data, (size_t)st.st_size);
    rc = 0;
done:
    free(data);
    if (f != NULL)
        fclose(f);
    return rc;
}

static int replay_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays the regular files of directory DIR; returns how many ran, or -1
 * at the first one that cannot be read. */
static int replay_dir(const char *dir)
{
    struct dirent **ents = NULL;
    char path[4096];
    struct stat st;
    int n, i, ran = 0;

    n = scandir(dir, &ents, NULL, NULL);
    if (n < 0) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    qsort(ents, (size_t)n, sizeof *ents, replay_name_cmp);
    for (i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (replay_file(path) < 0) {
            ran = -1;
            break;
        }
        ran++;
    }
    for (i = 0; i < n; i++)
        free(ents[i]);
    free(ents);
    return ran;
}

int main(int argc, char **argv)
{
    struct stat st;
    int total = 0, n, i;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        n = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0 ? 1 : -1;
        if (n < 0)
            return 1;
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "no inputs found\n");
        return 1;
    }
    printf("replayed %d inputs\n", total);
    return 0;
}

/* The floor of a warm directory query's proof, in C: list every directory below ROOT (one
 * level, as bench/corpus.py generates) and lstat each visible entry, in one process or
 * split between two (a forked one takes the second half of the directories); prints the
 * median and the best of ROUNDS, in ms.
 *
 *     cc -O2 -o statfloor bench/statfloor.c && ./statfloor ROOT PROCESSES ROUNDS
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MOST_DIRECTORIES 4096
#define MOST_ROUNDS 1000

static char *directories[MOST_DIRECTORIES];
static int count;

static double now_ms(void) {
    struct timespec clock;
    clock_gettime(CLOCK_MONOTONIC, &clock);
    return clock.tv_sec * 1e3 + clock.tv_nsec / 1e6;
}

static long walk(int root, int from, int to) {
    long sum = 0;
    for (int at = from; at < to; at++) {
        int descriptor = openat(root, directories[at], O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (descriptor < 0) continue;
        DIR *listing = fdopendir(descriptor);
        struct dirent *entry;
        while ((entry = readdir(listing)) != NULL) {
            struct stat info;
            if (entry->d_name[0] == '.') continue;
            if (fstatat(descriptor, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0)
                sum += info.st_size + info.st_mtim.tv_nsec + (long)info.st_ino;
        }
        closedir(listing);
    }
    return sum;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: statfloor ROOT PROCESSES(1|2) ROUNDS\n");
        return 2;
    }
    int root = open(argv[1], O_RDONLY | O_DIRECTORY);
    int processes = atoi(argv[2]), rounds = atoi(argv[3]);
    if (root < 0 || rounds < 1 || rounds > MOST_ROUNDS) {
        fprintf(stderr, "statfloor: cannot open %s, or ROUNDS not in 1..%d\n", argv[1], MOST_ROUNDS);
        return 1;
    }
    DIR *top = fdopendir(dup(root));
    struct dirent *entry;
    while ((entry = readdir(top)) != NULL && count < MOST_DIRECTORIES)
        if (entry->d_name[0] != '.' && entry->d_type == DT_DIR) directories[count++] = strdup(entry->d_name);
    closedir(top);
    static double took[MOST_ROUNDS];
    for (int round = 0; round < rounds; round++) {
        double start = now_ms();
        if (processes == 1) {
            walk(root, 0, count);
        } else {
            pid_t helper = fork();
            if (helper == 0) {
                walk(root, count / 2, count);
                _exit(0);
            }
            walk(root, 0, count / 2);
            waitpid(helper, NULL, 0);
        }
        took[round] = now_ms() - start;
    }
    qsort(took, rounds, sizeof took[0], by_value);
    printf("%.3f %.3f\n", took[rounds / 2], took[0]);
    return 0;
}

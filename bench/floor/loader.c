// SPDX-License-Identifier: GPL-2.0
// Attaches bench/floor/empty.bpf.c's empty fentry and fexit programs to each function named on
// the command line (one copy of the object per function: a tracing program is loaded against its
// target), prints each function's program ids (`FUNCTION ENTRY_ID EXIT_ID`, for the kernel's
// run counts) and a last line saying they are attached, and holds them until SIGINT or SIGTERM.
// Usage: loader OBJECT FUNCTION...
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int attach_one(const char *path, const char *function, struct bpf_object **object,
		      struct bpf_link **links)
{
	const char *names[2] = {"floor__fentry", "floor__fexit"};
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	int err = libbpf_get_error(obj);

	if (err) {
		fprintf(stderr, "loader: cannot open %s: %s\n", path, strerror(-err));
		return err;
	}
	for (int i = 0; i < 2; i++) {
		struct bpf_program *prog = bpf_object__find_program_by_name(obj, names[i]);

		if (!prog) {
			fprintf(stderr, "loader: %s has no program %s\n", path, names[i]);
			bpf_object__close(obj);
			return -ENOENT;
		}
		err = bpf_program__set_attach_target(prog, 0, function);
		if (err) {
			fprintf(stderr, "loader: %s: no BTF target: %s\n", function,
				strerror(-err));
			bpf_object__close(obj);
			return err;
		}
	}
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "loader: %s: load refused: %s\n", function, strerror(-err));
		bpf_object__close(obj);
		return err;
	}
	for (int i = 0; i < 2; i++) {
		links[i] = bpf_program__attach(bpf_object__find_program_by_name(obj, names[i]));
		err = libbpf_get_error(links[i]);
		if (err) {
			fprintf(stderr, "loader: %s: attach refused: %s\n", function,
				strerror(-err));
			links[i] = NULL;
			if (i)
				bpf_link__destroy(links[0]);
			bpf_object__close(obj);
			return err;
		}
	}
	*object = obj;
	printf("%s", function);
	for (int i = 0; i < 2; i++) {
		struct bpf_prog_info info = {0};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(bpf_object__find_program_by_name(obj, names[i]));

		printf(" %u", bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id);
	}
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	int count = argc - 2, attached = 0;
	struct bpf_object **objects;
	struct bpf_link **links;

	if (argc < 3) {
		fprintf(stderr, "usage: loader OBJECT FUNCTION...\n");
		return 2;
	}
	objects = calloc(count, sizeof(*objects));
	links = calloc(2 * count, sizeof(*links));
	if (!objects || !links)
		return 1;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (int i = 0; i < count; i++) {
		if (attach_one(argv[1], argv[i + 2], &objects[i], &links[2 * i]))
			return 1;
		attached++;
	}
	printf("floor attached: %d functions, an empty fentry and fexit each\n", attached);
	fflush(stdout);
	while (!stop)
		pause();
	for (int i = 0; i < count; i++) {
		bpf_link__destroy(links[2 * i]);
		bpf_link__destroy(links[2 * i + 1]);
		bpf_object__close(objects[i]);
	}
	return 0;
}

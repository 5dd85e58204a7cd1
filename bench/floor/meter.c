// SPDX-License-Identifier: GPL-2.0
// What a command costs the guest's CPUs, on the lab's instruction clock (lab/run --icount): a
// spinner on CPU, at SCHED_IDLE so that any other work there runs first, counts loop turns in
// shared memory while COMMAND runs. On that clock time advances with the instructions every vCPU
// runs (all on one host thread), and only while every vCPU is halted with the host's time; with
// the spinner, CPU never halts, so the time COMMAND took is the instructions run: its own, the
// kernel's on its behalf (interrupts included), the other CPUs' and the spinner's. The spinner's
// share is its turns over its rate, measured by running `sleep` the same way; the bench takes it
// out. Run COMMAND's work on CPU, where its device interrupts land.
// Prints one line: elapsed_ns=N spins=N status=N
// Usage: meter CPU COMMAND...
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct counter {
	volatile uint64_t turns;
	char pad[56];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin(struct counter *counter, volatile int *stop, int cpu)
{
	struct sched_param param = {0};
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) || sched_setscheduler(0, SCHED_IDLE, &param))
		_exit(1);
	while (!*stop)
		counter->turns++;
	_exit(0);
}

int main(int argc, char **argv)
{
	struct counter *counter;
	volatile int *stop;
	uint64_t t0, t1, s0, s1;
	pid_t spinner, child;
	int status = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: meter CPU COMMAND...\n");
		return 2;
	}
	counter = mmap(NULL, 2 * sizeof(*counter), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counter == MAP_FAILED) {
		perror("meter: mmap");
		return 1;
	}
	stop = (volatile int *)&counter[1];
	spinner = fork();
	if (spinner < 0) {
		perror("meter: fork");
		return 1;
	}
	if (spinner == 0)
		spin(counter, stop, atoi(argv[1]));
	// Until the spinner turns.
	while (!counter->turns)
		usleep(1000);
	s0 = counter->turns;
	t0 = now_ns();
	child = fork();
	if (child == 0) {
		execvp(argv[2], argv + 2);
		perror("meter: exec");
		_exit(127);
	}
	if (child < 0 || waitpid(child, &status, 0) < 0) {
		perror("meter: running the command");
		*stop = 1;
		return 1;
	}
	t1 = now_ns();
	s1 = counter->turns;
	*stop = 1;
	waitpid(spinner, NULL, 0);
	printf("elapsed_ns=%llu spins=%llu status=%d\n", (unsigned long long)(t1 - t0),
	       (unsigned long long)(s1 - s0), WIFEXITED(status) ? WEXITSTATUS(status) : 128);
	return 0;
}

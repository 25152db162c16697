/* Shared by the sidecar's end-to-end tests: the demo model made with
 * o1model in a scratch folder, an o1d serving it on the CPU, o1-sidecar
 * processes on free loopback ports (stdout and stderr to DIR/NAME.log,
 * the access log to DIR/NAME.access), and reference answers through
 * libo1client. Failures end the running cmocka test. */
#ifndef O1_SIDECAR_HARNESS_H
#define O1_SIDECAR_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <o1/client.h>

struct proc {
	pid_t pid;
	char log[192];
	int port; /* a sidecar's, from its ready line */
};

extern const char *o1d_bin, *o1model_bin, *sidecar_bin;
extern char dir[64], sock[128], model[128], metrics[128];
extern struct proc daemon_p;

uint64_t now_ms(void);
void sleep_ms(int ms);
/* The file at PATH, whole (caller frees). */
char *slurp(const char *path);
bool log_has(const char *path, const char *what);
/* Forks ARGV with its output to P->log and waits for READY there. */
void spawn(struct proc *p, char *const *argv, const char *ready);
/* SIGTERM and reap: the exit status, -1 on a signal death. */
int stop(struct proc *p);
/* Extra "--set" values for o1d (NULL-terminated, at most 4); set before
 * harness_setup. */
extern const char *daemon_sets[5];
/* o1d on the model in DIR, socket DIR/o1d.sock, metrics in a shm file. */
void start_daemon(void);
/* A sidecar in front of it, with extra "--set" values (NULL-terminated,
 * at most 4). */
void start_sidecar(struct proc *p, const char *name, const char *const *sets);
/* o1model make's preset for harness_setup: "demo" unless set before. */
extern const char *harness_preset;
/* Makes DIR and the model (harness_preset), starts o1d; 0 or -1. */
int harness_setup(const char *o1d, const char *o1model, const char *sidecar);
/* A group teardown: stops the N SIDECARS and o1d, then removes DIR;
 * -1 (each bad exit code on stderr) when any did not exit 0. */
int harness_teardown(struct proc *const *sidecars, size_t n);
/* A main's command line: O1D O1MODEL O1_SIDECAR into the *_bin names,
 * then MIN_EXTRA to MAX_EXTRA more (left in argv[4..], EXTRA names them
 * in the usage line); SIGPIPE ignored (a peer's hang-up is a test's
 * result, not its death). Returns 0, or 2 after the usage line. */
int harness_args(int argc, char **argv, int min_extra, int max_extra,
		 const char *extra);

struct cJSON;

/* METHOD PATH to sidecar P with BODY (NULL: none) through curl; the
 * answer's body into *OUT (malloc'd, NUL-terminated); returns the HTTP
 * status. */
int http_to(const struct proc *p, const char *method, const char *path,
	    const char *body, char **out);
/* The member at PATH in J ("a.b.0.c": names and array indices); a
 * missing one, or one of the wrong type, fails the test. */
const struct cJSON *json_at(const struct cJSON *j, const char *path);
const char *json_str(const struct cJSON *j, const char *path);
double json_num(const struct cJSON *j, const char *path);

struct direct {
	char text[8192];
	size_t len;
	struct o1_event final;
};

/* Generates greedily through a fresh libo1client connection. */
void direct(const char *text, size_t len, uint32_t flags, uint32_t max_tokens,
	    const char *stop, struct direct *d);

#endif

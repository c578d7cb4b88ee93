/*
** pty_run -- runs a command under a pseudo-terminal for the REPL specs, typing each line of
** its standard input only once the command shows a prompt (output ending in "> "), as a
** user would: line editors discard what is typed before they read. After the last line it
** types Ctrl-D at the next prompt, then copies everything the terminal showed to stdout and
** exits with the command's status (124 when it outlives the timeout).
**
**   pty_run SECONDS COMMAND [ARGS...] < lines
*/
#define _DEFAULT_SOURCE
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char shown[1 << 20];
static size_t nshown;

static double now (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads what the terminal shows for up to `wait` seconds; 1 when the command closed it. */
static int drain (int fd, double wait) {
  struct pollfd p = {fd, POLLIN, 0};
  int r = poll(&p, 1, (int)(wait * 1000));
  if (r > 0) {
    ssize_t n = read(fd, shown + nshown, sizeof shown - nshown - 1);
    if (n <= 0) return 1;
    nshown += (size_t)n;
  }
  return 0;
}

/* Whether the last visible characters are a prompt ("> "), terminal codes aside. */
static int at_prompt (size_t since) {
  size_t i = nshown;
  while (i > since && (shown[i - 1] == '\r' || shown[i - 1] == '\n')) i--;
  return i >= since + 2 && shown[i - 1] == ' ' && shown[i - 2] == '>';
}

int main (int argc, char **argv) {
  double limit, deadline;
  int fd, status = 0, closed = 0;
  char line[8192];
  pid_t pid;
  size_t mark = 0;
  if (argc < 3) { fprintf(stderr, "usage: pty_run SECONDS COMMAND [ARGS...] < lines\n"); return 2; }
  limit = atof(argv[1]);
  deadline = now() + limit;
  pid = forkpty(&fd, NULL, NULL, NULL);
  if (pid < 0) { perror("pty_run: forkpty"); return 2; }
  if (pid == 0) {
    setenv("TERM", "xterm", 0);
    execvp(argv[2], argv + 2);
    perror("pty_run: exec");
    _exit(127);
  }
  for (;;) {
    int eof = fgets(line, sizeof line, stdin) == NULL;
    while (!closed && !at_prompt(mark) && now() < deadline) closed = drain(fd, 0.05);
    if (closed || now() >= deadline) break;
    drain(fd, 0.05);  /* let the editor settle into reading: it may flush what came before */
    mark = nshown;
    if (eof) break;
    (void)!write(fd, line, strlen(line));
  }
  /* Ctrl-D until the command ends (typed again each second, in case it came too early) */
  while (!closed && now() < deadline) {
    double next = now() + 1.0;
    (void)!write(fd, "\004", 1);
    while (!closed && now() < next && now() < deadline) closed = drain(fd, 0.05);
  }
  if (!closed) { kill(pid, SIGKILL); waitpid(pid, &status, 0); status = 124; }
  else if (waitpid(pid, &status, 0) == pid) status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  fwrite(shown, 1, nshown, stdout);
  return status;
}

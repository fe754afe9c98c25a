/* The shell-less test image's only program: writes $WRITER_FILE (default
 * /test-package/written), then waits for SIGTERM. An image with no /bin/sh, so only a
 * hook that needs no shell can clean up after it. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

int main(void) {
  const char *path = getenv("WRITER_FILE");
  if (!path) path = "/test-package/written";
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 1;
  const char msg[] = "written by a static program in a shell-less image\n";
  if (write(fd, msg, sizeof msg - 1) < 0) return 1;
  close(fd);
  signal(SIGTERM, stop);
  for (;;) pause();
}

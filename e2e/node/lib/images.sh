# Local images for the node (no registry is reachable): docker-archive tars written by
# images/mkimage.py into $NODE_IMAGES, imported by node_start. Sourced by run.sh.
#   localhost/prestop-e2e/pause:1            the sandbox image: a static pause program
#   docker.io/library/busybox:stable         Debian's static busybox and its applet links:
#                                            the seed Job's image name, so the webhook's
#                                            "busybox has no bash" knowledge applies
#   localhost/prestop-e2e/bash:1             busybox plus Debian's static bash at /bin/bash
#   localhost/prestop-e2e/static-writer:1    one static C program, no shell at all
#   localhost/prestop-e2e/cleaner:dev        /usr/local/bin/prestop-clean only (issue 10),
#                                            when the cleaner is built (CLEANER_BIN)
NODE_IMAGE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../images" && pwd)"

node_build_images() {
  local out=$NODE_IMAGES mk="$NODE_IMAGE_DIR/mkimage.py" bin="$NODE_IMAGES/bin"
  mkdir -p "$bin"
  gcc -static -O2 -o "$bin/pause" "$NODE_IMAGE_DIR/pause.c" &&
    gcc -static -O2 -o "$bin/writer" "$NODE_IMAGE_DIR/writer.c" || return 1
  python3 "$mk" "$out/pause.tar" localhost/prestop-e2e/pause:1 --cmd '["/pause"]' "/pause=$bin/pause" || return 1

  local applets=() a
  for a in $(/bin/busybox --list); do
    [[ "$a" == busybox ]] || applets+=("/bin/$a->busybox")
  done
  python3 "$mk" "$out/busybox.tar" docker.io/library/busybox:stable --cmd '["sh"]' \
    /bin/busybox=/bin/busybox "${applets[@]}" /tmp/ /etc/ || return 1
  python3 "$mk" "$out/bash.tar" localhost/prestop-e2e/bash:1 --cmd '["/bin/bash"]' \
    /bin/busybox=/bin/busybox "${applets[@]}" /bin/bash=/bin/bash-static /tmp/ /etc/ || return 1
  python3 "$mk" "$out/static-writer.tar" localhost/prestop-e2e/static-writer:1 \
    --cmd '["/writer"]' "/writer=$bin/writer" || return 1
  if [[ -n "${CLEANER_BIN:-}" ]]; then
    python3 "$mk" "$out/cleaner.tar" localhost/prestop-e2e/cleaner:dev \
      --cmd '["/usr/local/bin/prestop-clean"]' "/usr/local/bin/prestop-clean=$CLEANER_BIN" || return 1
  fi
  rm -rf "$bin"
}

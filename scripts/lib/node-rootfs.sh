# Sourced by the image builds (build-images.sh, build-control-plane-image.sh): a root file system
# for a dynamically linked node binary of this host, with no base image.

# node_libs NODE_BIN: the shared libraries ldd lists for it, the loader included, one path a line.
node_libs() {
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
}

# node_rootfs ROOTFS NODE_BIN: NODE_BIN as ROOTFS/usr/bin/node, its libraries at the paths ldd
# names, a world-writable /tmp and the name service switch for hosts.
node_rootfs() {
  local rootfs=$1 node_bin=$2 lib
  mkdir -p "$rootfs"/{etc,tmp,usr/bin}
  chmod 1777 "$rootfs/tmp"
  cp "$node_bin" "$rootfs/usr/bin/node"
  for lib in $(node_libs "$node_bin"); do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
  # /etc/hosts and /etc/resolv.conf come from Docker; glibc 2.34+ has files and dns built in.
  printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
}

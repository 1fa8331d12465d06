#!/usr/bin/env bash
# run-in-guest.sh [--] CMD [ARGS...]
#
# Runs CMD inside a throw-away qemu guest that has a Soft-RoCE device rxe0
# (PORT_ACTIVE), in the same working directory, and exits with CMD's status.
# Needed because the host kernel has no RDMA support, so rdma_rxe cannot load
# here.  The guest boots the host's Debian kernel and sees the host's root
# filesystem read-only (writes go to a RAM overlay and are lost) except the
# current directory, which is shared read-write at the same path.  The guest's
# /tmp, /run and /dev/shm are its own tmpfs: a host directory under them (a
# build tree under a /tmp checkout) is visible only if shared.  RWIN_RXE_SHARE
# names more host directories to share read-write at their own paths, one per
# line (a path may contain spaces); scripts that run a build tree's binaries
# share that build tree, wherever it lives.
# See tests/rxe/README.md for knobs, timings and pitfalls.
#
# Exit status: CMD's; 124 timeout; 125 the guest never reported (set-up error).
set -euo pipefail

say() { echo "run-in-guest: $*" >&2; }
die() { say "$*"; exit 125; }
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || die "usage: run-in-guest.sh [--] CMD [ARGS...]"
# Already inside a guest (a test script calling us again): just run it.
[ "${RWIN_IN_GUEST:-}" = 1 ] && exec "$@"

CACHE=${RWIN_RXE_CACHE:-/tmp/rwin-rxe}
TIMEOUT=${RWIN_RXE_TIMEOUT:-900}
NODES=${RWIN_RXE_NODES:-1}
# RWIN_RXE_NICS=2: a second NIC per guest (eth1, 10.0.3.15+node/24) with its own Soft-RoCE device rxe1,
# for multi-device (RWIN_IB_HCA) tests; exported in the guest as RWIN_RXE_DEV2=rxe1.
NICS=${RWIN_RXE_NICS:-1}
case $NICS in 1|2) ;; *) die "RWIN_RXE_NICS must be 1 or 2" ;; esac
GRACE=${RWIN_RXE_GRACE:-30}     # s the other node may still run after one failed
# s a guest may take to reach its command (about 5 s alone, 20-40 s beside another guest and a build);
# one that has not is killed and booted again, once. Two CI runs lost a two-guest step to a node 1
# that printed nothing at all, not even its init's first line, while node 0 ran alone.
BOOT_LIMIT=${RWIN_RXE_BOOT_LIMIT:-90}
VERBOSE=${RWIN_RXE_VERBOSE:-0}
case $NODES in 1|2) ;; *) die "RWIN_RXE_NODES must be 1 or 2" ;; esac
# >= 2 vCPUs for one guest (with 1, two busy-polling processes only take turns
# on 4 ms scheduler ticks); with two guests on a 2-core host 1 each is what fits.
SMP=${RWIN_RXE_SMP:-$((NODES == 1 ? 2 : 1))}
mkdir -p "$CACHE"

# ---- host packages: install only what is missing, only as root ----------------
# A kernel with rdma_rxe: the host's newest, else Debian's kernel package unpacked into the cache
# (unpack_kernel). Prints the vmlinuz path; its modules are in ../lib/modules/VERSION beside /boot.
kernel_with_rxe() {
  local k root
  for root in "" "$CACHE/kernel"; do
    for k in $(ls "$root"/boot/vmlinuz-* 2>/dev/null | sort -rV); do
      compgen -G "$root/lib/modules/${k##*/vmlinuz-}/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*" >/dev/null && { echo "$k"; return; }
    done
  done; return 0
}
missing=()
need() { command -v "$1" >/dev/null || [[ " ${missing[*]} " == *" $2 "* ]] || missing+=("$2"); }
need qemu-system-x86_64 qemu-system-x86; need modprobe kmod; need depmod kmod
need cpio cpio; need ip iproute2; need rdma iproute2; need ibv_devinfo ibverbs-utils
need ibv_rc_pingpong ibverbs-utils; need ib_write_bw perftest; need xz xz-utils
need dpkg-deb dpkg; need apt-get apt
compgen -G '/usr/lib/*/libibverbs/librxe-rdmav*.so' >/dev/null || missing+=(ibverbs-providers rdma-core)
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "missing host packages: ${missing[*]} (install them as root)"
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # No recommends: qemu's pull in GStreamer, speech data and firmware, minutes of installing for nothing.
  ( flock 8; apt-get install -y -q --no-install-recommends "${missing[@]}" || { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; }
  ) 8>"$CACHE/.apt.lock" >&2 || die "apt-get install ${missing[*]} failed"
fi

# No kernel with rdma_rxe on the host: Debian's (the package linux-image-amd64 points at) is downloaded
# and unpacked into $CACHE/kernel, not installed. Installing it cost 2-5 min of a CI run building two
# initramfs images the guest never boots (it has its own, below), and on a user's machine it would
# change what the machine boots next; unpacked, it needs no root either.
unpack_kernel() {  # runs under the cache lock
  local pkg t=$CACHE/kernel.$$
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
  if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
    apt-get update -q >&2 || true
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ {print $2; exit}')
  fi
  [ -n "$pkg" ] || die "no kernel with rdma_rxe here, and apt knows no linux-image-amd64 to unpack (apt-get update as root?)"
  say "no kernel with rdma_rxe on this host: unpacking $pkg into $CACHE/kernel"
  rm -rf "$t"; mkdir -p "$t/deb"
  # apt-get download writes to the current directory (as root: unsandboxed, which it warns about).
  (cd "$t/deb" && apt-get download -q "$pkg" 2>&1 | grep -v "unsandboxed" >&2) || true
  compgen -G "$t/deb/*.deb" >/dev/null || { rm -rf "$t"; die "apt-get download $pkg failed"; }
  dpkg-deb -x "$t"/deb/*.deb "$t/root" || { rm -rf "$t"; die "dpkg-deb -x of $pkg failed"; }
  local v; v=$(ls "$t/root/lib/modules")
  depmod -b "$t/root" "$v" || { rm -rf "$t"; die "depmod of $pkg failed"; }
  rm -rf "$CACHE/kernel"; mv "$t/root" "$CACHE/kernel"; rm -rf "$t"
}
exec 9>"$CACHE/.lock"; flock 9
[ -n "${RWIN_RXE_KERNEL:-}" ] || [ -n "$(kernel_with_rxe)" ] || unpack_kernel
flock -u 9; exec 9>&-

# ---- kernel + initramfs, cached; rebuilt when this script or the kernel changes --
KERNEL=${RWIN_RXE_KERNEL:-$(kernel_with_rxe)}
[ -n "$KERNEL" ] || die "no kernel with rdma_rxe found"
KVER=${KERNEL##*/vmlinuz-}
KROOT=  # where its lib/modules is: "" for the host's own kernel
[[ $KERNEL == */boot/vmlinuz-* ]] && KROOT=${KERNEL%/boot/vmlinuz-*}
[ -r "$KERNEL" ] || die "cannot read $KERNEL (Debian makes it 0600: run as root)"
KEY=$( { cat "${BASH_SOURCE[0]}"; echo "$KVER"; stat -c '%s %Y' "$KERNEL"; } | md5sum | cut -c1-10)
IMG=$CACHE/img-$KVER-$KEY
MODS="virtio_pci virtio_console virtio_net 9pnet_virtio 9p overlay crc32_generic rdma_rxe rdma_ucm ib_umad sch_netem"

build_images() {  # -> $IMG/{vmlinux,initrd.cpio}; runs under the cache lock
  local t=$CACHE/build.$$ s off
  rm -rf "$t"; mkdir -p "$t"/root/{bin,sbin,proc,newroot,lower,rw/upper,rw/work}
  # Boot the ELF vmlinux through its PVH entry: skips in-guest xz decompression,
  # which takes ~3.5 s under TCG.  The bzImage header tells where the payload is:
  # setup_sects at 0x1f1, payload_offset at 0x248 (x86 boot protocol >= 2.08).
  s=$(od -An -tu1 -j 0x1f1 -N1 "$KERNEL" | tr -d ' '); [ "$s" = 0 ] && s=4
  off=$(( (s + 1) * 512 + $(od -An -tu4 -j 0x248 -N4 "$KERNEL" | tr -d ' ') ))
  tail -c +$((off + 1)) "$KERNEL" | { xz -dc --single-stream 2>/dev/null || zstd -dc 2>/dev/null; } > "$t/vmlinux" || true  # (tail gets SIGPIPE)
  [ "$(head -c4 "$t/vmlinux")" = $'\x7fELF' ] || { say "no ELF vmlinux, booting the bzImage (slower)"; cp "$KERNEL" "$t/vmlinux"; }
  # Initramfs from the host's own binaries (no busybox package needed).
  local r=$t/root b l m f g
  for b in dash:sh kmod:modprobe mount:mount ip:ip rdma:rdma ln:ln sleep:sleep chroot:chroot; do
    f=$(command -v "${b%%:*}") || die "host tool ${b%%:*} missing"
    cp -L "$f" "$r/bin/${b#*:}"
    for l in $(ldd "$f" | grep -o '/[^ ]*'); do mkdir -p "$r${l%/*}"; cp -Ln "$l" "$r$l"; done
  done
  ln -s ../bin/modprobe "$r/sbin/modprobe"   # the kernel's request_module() uses it
  # Only the needed modules + their dependencies: one 'modprobe -a' loads them all.
  mkdir -p "$r/lib/modules/$KVER"
  cp "$KROOT/lib/modules/$KVER"/modules.{builtin,builtin.modinfo,order} "$r/lib/modules/$KVER/"
  for m in $MODS; do
    for f in $(modprobe -d "${KROOT:-/}" -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" {print $2}'); do
      g=${f#"$KROOT"}   # its path in the guest
      mkdir -p "$r${g%/*}"; cp -n "$f" "$r$g"
    done
  done
  depmod -b "$r" "$KVER" || die "depmod failed"
  # Mounted by one 'mount -a' (each exec costs 50-100 ms under TCG).
  cat > "$r/fstab" <<'EOF'
hostroot /lower 9p trans=virtio,version=9p2000.L,msize=512000,ro,cache=loose 0 0
overlay /newroot overlay lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work 0 0
ctl /newroot/.rwin-ctl 9p trans=virtio,version=9p2000.L,cache=none,X-mount.mkdir 0 0
proc /newroot/proc proc defaults 0 0
sys /newroot/sys sysfs defaults 0 0
dev /newroot/dev devtmpfs defaults 0 0
devpts /newroot/dev/pts devpts ptmxmode=666,X-mount.mkdir 0 0
shm /newroot/dev/shm tmpfs mode=1777,X-mount.mkdir 0 0
run /newroot/run tmpfs mode=755 0 0
tmp /newroot/tmp tmpfs mode=1777 0 0
EOF
  cat > "$r/init" <<EOF
#!/bin/sh
# Guest PID 1 in the initramfs: modules, mounts, network, rxe0, then chroot.
export PATH=/bin; N=/newroot; C=\$N/.rwin-ctl
mount -n -t proc proc /proc
log() { read -r up _ < /proc/uptime; echo "rwin-init: \${up}s \$*" > /dev/console; }
fail() { log "FAILED: \$*"; echo "\$*" > \$C/setup-error; echo o > /proc/sysrq-trigger; sleep 60; }
log start
modprobe -a $MODS || fail "modprobe failed"
mount -n -a -T /fstab || fail "mount -a failed"
read -r NODE IP _ < \$C/node
# "TAG PATH" per line: the current directory and RWIN_RXE_SHARE, each mounted at its host path.
while IFS= read -r l; do
  mount -n -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap,X-mount.mkdir "\${l%% *}" "\$N\${l#* }" || fail "9p mount of \${l#* } failed"
done < \$C/shares
echo "rwin-n\$NODE" > /proc/sys/kernel/hostname
printf '127.0.0.1 localhost\n10.0.2.15 rwin-n0\n10.0.2.16 rwin-n1\n' > \$N/etc/hosts
printf 'link set lo up\nlink set eth0 up\naddr add %s/24 dev eth0\n' \$IP > /run.batch
ip -b /run.batch || fail "network set-up failed"
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add failed (crc32 missing?)"
i=0
until read -r st _ < \$N/sys/class/infiniband/rxe0/ports/1/state && [ "\$st" = 4: ]; do
  i=\$((i + 1)); [ \$i -lt 200 ] || fail "rxe0 never became ACTIVE"; sleep 0.05
done
log "rxe0 ACTIVE"
if [ -e \$N/sys/class/net/eth1 ]; then
  printf 'link set eth1 up\naddr add 10.0.3.%s/24 dev eth1\n' \$((15 + NODE)) > /run.batch1
  ip -b /run.batch1 || fail "network set-up of eth1 failed"
  rdma link add rxe1 type rxe netdev eth1 || fail "rdma link add rxe1 failed"
  i=0
  until read -r st _ < \$N/sys/class/infiniband/rxe1/ports/1/state && [ "\$st" = 4: ]; do
    i=\$((i + 1)); [ \$i -lt 200 ] || fail "rxe1 never became ACTIVE"; sleep 0.05
  done
  log "rxe1 ACTIVE"
fi
ln -s /proc/self/fd \$N/dev/fd; ln -s fd/0 \$N/dev/stdin; ln -s fd/1 \$N/dev/stdout; ln -s fd/2 \$N/dev/stderr
# mount --move + chroot: switch_root took ~9 s under TCG with 1 vCPU.
cd \$N && mount -n --move . / || fail "mount --move failed"
exec chroot . /bin/bash /.rwin-ctl/stage2.sh
EOF
  chmod 755 "$r/init"
  (cd "$r" && find . | cpio -o -H newc --quiet) > "$t/initrd.cpio"
  rm -rf "$t/root" "$CACHE"/img-*   # older images (other script version or kernel)
  mv "$t" "$IMG"
}
exec 9>"$CACHE/.lock"; flock 9
[ -s "$IMG/initrd.cpio" ] || { say "building guest images in $IMG"; build_images; }
flock -u 9; exec 9>&-
VMLINUX=$IMG/vmlinux INITRD=$IMG/initrd.cpio
set +e   # from here on every failure is handled explicitly

# ---- per-run directory: one control dir per node, shared with that guest -----
CWD=$(pwd -P)
[[ $CWD != *$'\n'* ]] || die "working directory name contains a newline"
# Shared read-write: the current directory and RWIN_RXE_SHARE; one directory inside another is
# covered by it, and / (the read-only root) is not mounted again.
SHARES=("$CWD")
while IFS= read -r s; do
  [ -n "$s" ] || continue
  s=$(cd "$s" 2>/dev/null && pwd -P) || die "RWIN_RXE_SHARE: no directory $s"
  SHARES+=("$s")
done <<< "${RWIN_RXE_SHARE:-}"
MOUNTS=()
for s in "${SHARES[@]}"; do
  keep=1; [[ $s == / ]] && keep=0
  for o in "${SHARES[@]}"; do
    [[ $o != "$s" && ( $o == / || $s == "$o"/* ) ]] && keep=0   # inside another share
  done
  for o in "${MOUNTS[@]}"; do [[ $o == "$s" ]] && keep=0; done  # listed twice
  [ $keep = 0 ] || MOUNTS+=("$s")
done
for d in "$CACHE"/run.*; do   # left behind by a SIGKILLed run (its qemu died with it)
  [ -e "$d/pid" ] && ! kill -0 "$(< "$d/pid")" 2>/dev/null && rm -rf "$d"
done
RUN=$(mktemp -d "$CACHE/run.XXXXXX"); echo $$ > "$RUN/pid"
QPID=(); TPID=()
stop_guests() {   # TERM, then KILL whoever is still there after 5 s
  local p n
  for p in "${QPID[@]}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  for n in $(seq 50); do
    for p in "${QPID[@]}"; do [ -n "$p" ] && kill -0 "$p" 2>/dev/null && break; p=; done
    [ -z "$p" ] && return 0; sleep 0.1
  done
  for p in "${QPID[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done; return 0
}
cleanup() {
  stop_guests
  for p in "${TPID[@]}"; do kill "$p" 2>/dev/null; done
  if [ "${RWIN_RXE_KEEP:-0}" = 1 ]; then say "kept $RUN"; else rm -rf "$RUN"; fi
}
trap cleanup EXIT
trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP

PASS_RE='^(PATH|HOME|LANG|LC_[A-Z]+|TERM|(UCX|RDMAV|IBV|RWIN|GTEST|OMPI)_[A-Za-z0-9_]+)$'
for v in $(compgen -e); do
  [[ $v =~ $PASS_RE || " ${RWIN_RXE_PASSENV:-} " == *" $v "* ]] && printf 'export %s=%q\n' "$v" "${!v}"
done > "$RUN/env.sh"

# Guest stage 2: bash from the host root fs, PID 1 after the chroot.
cat > "$RUN/stage2.sh" <<'EOF'
C=/.rwin-ctl
log() { read -r up _ < /proc/uptime; echo "rwin-guest: ${up}s $*" > /dev/console; }
off() { sync; echo o > /proc/sysrq-trigger; sleep 60; }
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
ulimit -l unlimited; ulimit -n 65536
# UCX 1.13 ud_verbs reads the RoCE GRH type from wc.sl (mlx5 habit); rxe leaves it
# 0, so every UD packet fails the dgid check and is dropped.  A host value wins.
export UCX_UD_ETH_DGID_CHECK=n
. $C/env.sh
read -r RWIN_RXE_NODE RWIN_RXE_IP RWIN_RXE_PEER_IP RWIN_RXE_NODES < $C/node
# The GID index whose entry is ::ffff:<our IPv4> (RoCE v2); 1 with ipv6=off.
printf -v want '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${RWIN_RXE_IP//./ }
for i in {0..15} x; do
  [ $i = x ] && { echo "no IPv4 GID on rxe0" > $C/setup-error; off; }
  read -r g < /sys/class/infiniband/rxe0/ports/1/gids/$i 2>/dev/null && [ "$g" = "$want" ] && break
done
export RWIN_IN_GUEST=1 RWIN_RXE_DEV=rxe0 RWIN_RXE_GID_INDEX=$i RWIN_RXE_NODE RWIN_RXE_NODES RWIN_RXE_IP RWIN_RXE_PEER_IP
[ -e /sys/class/infiniband/rxe1 ] && export RWIN_RXE_DEV2=rxe1
. $C/cmd.sh || { echo "cd to the working directory failed" > $C/setup-error; off; }
out=(/dev/vport*p1) err=(/dev/vport*p2)   # the only virtio-serial device
# Through pipes: a virtio port can be open only once, so a command that opens
# /dev/stdout or /dev/stderr by name (tee /dev/stderr) would get EBUSY.
mkfifo /run/rwin.out /run/rwin.err
cat < /run/rwin.out > "${out[0]}" & c1=$!
cat < /run/rwin.err > "${err[0]}" & c2=$!
# Two nodes start their commands together: a node whose guest had to boot again (BOOT_LIMIT) would
# otherwise find its peer's job already timed out. The host writes $C/go once every node is here.
: > $C/booted
if [ "$RWIN_RXE_NODES" != 1 ]; then
  for i in $(seq 6000); do [ -e $C/go ] && break; sleep 0.1; done
  [ -e $C/go ] || { echo "the other node never booted (600 s)" > $C/setup-error; off; }
fi
log "running command"; : > $C/started
"$@" < /dev/null > /run/rwin.out 2> /run/rwin.err
rc=$?
# Let the cats drain; a daemon the command left behind keeps the pipes open, so
# do not wait for EOF longer than 3 s.
for i in {1..60}; do [ -e /proc/$c1 ] || [ -e /proc/$c2 ] || break; sleep 0.05; done
cd /; sync; echo $rc > $C/rc; log "command exited with $rc"; off
EOF

qesc() { printf '%s' "${1//,/,,}"; }   # a comma in a qemu option value is doubled
APPEND="console=ttyS0 quiet panic=-1 oops=panic nowatchdog mitigations=off cryptomgr.notests acpi=noirq ${RWIN_RXE_APPEND:-}"
ACCEL=${RWIN_RXE_ACCEL:-tcg}
[ -z "${RWIN_RXE_ACCEL:-}" ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo && ACCEL=kvm
case $ACCEL in
  kvm) ACC=(-accel kvm -cpu "${RWIN_RXE_CPU:-host}") ;;
  # Nehalem: 'max' makes rxe 1.5-2x slower (rep movsb/AVX emulation); the default
  # 1 GiB translation cache doubled qemu's RSS for no speed-up.
  tcg) ACC=(-accel tcg,thread=multi,tb-size=256 -cpu "${RWIN_RXE_CPU:-Nehalem}") ;;
  *) die "RWIN_RXE_ACCEL must be kvm or tcg" ;;
esac
follow() {  # stream a file until its qemu exits; two nodes: prefix lines with [nN]
  if [ "$NODES" = 1 ]; then tail -q -c +1 -s 0.1 -f --pid="${QPID[n]}" "$1"
  else tail -q -c +1 -s 0.1 -f --pid="${QPID[n]}" "$1" | sed -u "s/^/[n$n] /"; fi
}
CMD=("$@")
launch() {  # launch N: boot node N's guest (again: its files start afresh)
  local n=$1 d=$RUN/n$1 i
  rm -rf "$d" "$RUN/s$n" "$RUN/t$n"; mkdir "$d"   # (qemu binds its socket path anew)
  LAUNCHED[n]=$SECONDS
  cp "$RUN/env.sh" "$RUN/stage2.sh" "$d/"
  { printf 'cd -- %q || return 1\nset --' "$CWD"; printf ' %q' "${CMD[@]}"; echo; } > "$d/cmd.sh"
  ip=10.0.2.$((15 + n)); peer=$ip; [ "$NODES" = 2 ] && peer=10.0.2.$((16 - n))
  echo "$n $ip $peer $NODES" > "$d/node"
  for i in "${!MOUNTS[@]}"; do echo "share$i ${MOUNTS[i]}"; done > "$d/shares"
  : > "$d/stdout"; : > "$d/stderr"; : > "$d/console.log"
  if [ "$NODES" = 1 ]; then  # slirp that reaches nothing; ipv6=off keeps the GID table fixed
    net=(-netdev user,id=net,restrict=on,ipv6=off)
    net1=(-netdev user,id=net1,restrict=on,ipv6=off)
  else                       # the two guests' NICs joined by a unix datagram socket pair
    net=(-netdev "dgram,id=net,local.type=unix,local.path=$RUN/s$n,remote.type=unix,remote.path=$RUN/s$((1 - n))")
    net1=(-netdev "dgram,id=net1,local.type=unix,local.path=$RUN/t$n,remote.type=unix,remote.path=$RUN/t$((1 - n))")
  fi
  nic1=()  # after eth0's device, so that eth0 keeps the first PCI slot
  [ "$NICS" = 2 ] && nic1=("${net1[@]}" -device "virtio-net-pci,netdev=net1,mac=52:54:00:12:35:5$((6 + n))")
  args=("${ACC[@]}" -smp "$SMP" -m "${RWIN_RXE_MEM:-2G}" -nodefaults -no-user-config -display none -no-reboot
    -kernel "$VMLINUX" -initrd "$INITRD" -append "$APPEND"
    -chardev "file,id=con,path=$(qesc "$d/console.log")" -serial chardev:con
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
    -virtfs "local,path=$(qesc "$d"),mount_tag=ctl,security_model=none"
    -device virtio-serial-pci
    -chardev "file,id=out,path=$(qesc "$d/stdout")" -device virtserialport,chardev=out,nr=1
    -chardev "file,id=err,path=$(qesc "$d/stderr")" -device virtserialport,chardev=err,nr=2
    "${net[@]}" -device "virtio-net-pci,netdev=net,mac=52:54:00:12:34:5$((6 + n))" "${nic1[@]}")
  for i in "${!MOUNTS[@]}"; do
    args+=(-virtfs "local,path=$(qesc "${MOUNTS[i]}"),mount_tag=share$i,security_model=none,multidevs=remap")
  done
  # pdeathsig: qemu dies with this script even if the script is SIGKILLed.
  setpriv --pdeathsig KILL -- qemu-system-x86_64 "${args[@]}" > "$d/qemu.log" 2>&1 &
  QPID[n]=$!
  follow "$d/stdout" & TPID+=($!)
  follow "$d/stderr" >&2 & TPID+=($!)
  [ "$VERBOSE" = 1 ] && { follow "$d/console.log" >&2 & TPID+=($!); }
}
T0=$EPOCHREALTIME SECONDS=0 LAUNCHED=() RELAUNCHED=()
for ((n = 0; n < NODES; n++)); do launch $n; done

# ---- wait: timeout, or a failed node ends the run after GRACE seconds -------
RC=(); fail_at= go=0
while :; do
  for ((n = 0; n < NODES; n++)); do  # a guest stuck in its boot is booted again, once
    d=$RUN/n$n
    if [ -z "${RC[n]:-}" ] && [ ! -e "$d/booted" ] && [ $((SECONDS - LAUNCHED[n])) -ge "$BOOT_LIMIT" ] && [ -z "${RELAUNCHED[n]:-}" ]; then
      say "node $n: not booted after ${BOOT_LIMIT}s (RWIN_RXE_BOOT_LIMIT), booting it again; its console said:"
      tail -n 5 "$d/console.log" >&2
      kill "${QPID[n]}" 2>/dev/null; wait "${QPID[n]}" 2>/dev/null; RELAUNCHED[n]=1
      launch "$n"
    fi
  done
  if [ $go = 0 ]; then  # every node at its command: they start it together
    go=1; for ((n = 0; n < NODES; n++)); do [ -e "$RUN/n$n/booted" ] || go=0; done
    [ $go = 1 ] && for ((n = 0; n < NODES; n++)); do : > "$RUN/n$n/go"; done
  fi
  alive=0
  for ((n = 0; n < NODES; n++)); do
    [ -n "${RC[n]:-}" ] && continue
    if kill -0 "${QPID[n]}" 2>/dev/null; then alive=1; continue; fi
    wait "${QPID[n]}" || true; QPID[n]=
    d=$RUN/n$n; RC[n]=125; [ -s "$d/rc" ] && RC[n]=$(< "$d/rc")
    [ "$VERBOSE" = 1 ] && say "node $n: command started $(awk -v a="$T0" -v b="$(stat -c %.3Y "$d/started" 2>/dev/null || echo "$T0")" 'BEGIN{printf "%.2f", b-a}') s after launch, exit ${RC[n]} after $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.2f", b-a}') s"
    [ "${RC[n]}" = 0 ] || fail_at=${fail_at:-$SECONDS}
  done
  [ $alive = 0 ] && break
  if [ $SECONDS -ge "$TIMEOUT" ]; then
    say "timeout after ${TIMEOUT}s (RWIN_RXE_TIMEOUT), killing the guest(s)"
    for ((n = 0; n < NODES; n++)); do [ -n "${RC[n]:-}" ] || RC[n]=124; done; break
  fi
  if [ -n "$fail_at" ] && [ $((SECONDS - fail_at)) -ge "$GRACE" ]; then
    say "a node failed ${GRACE}s ago (RWIN_RXE_GRACE), stopping the other"
    for ((n = 0; n < NODES; n++)); do [ -n "${RC[n]:-}" ] || RC[n]=stopped; done; break
  fi
  sleep 0.2
done
stop_guests; wait "${TPID[@]}" 2>/dev/null || true; TPID=()

final=0
for ((n = 0; n < NODES; n++)); do
  d=$RUN/n$n; p=; [ "$NODES" = 2 ] && p="node $n: "
  if [ "${RC[n]}" = 125 ]; then
    say "${p}guest exited without reporting a status${RWIN_RXE_KEEP:+ (run dir $RUN)}"
    [ -s "$d/setup-error" ] && say "${p}set-up error: $(< "$d/setup-error")"
    tail -n 5 "$d/qemu.log" >&2; echo "---- ${p}last console lines:" >&2; tail -n 30 "$d/console.log" >&2
  fi
  if [ "${RC[n]}" = stopped ]; then  # why it was still running: its command, or its boot
    if [ -e "$d/started" ]; then
      say "${p}stopped; its command had started $(awk -v a="$T0" -v b="$(stat -c %.3Y "$d/started")" 'BEGIN{printf "%.1f", b-a}') s after launch"
    else
      say "${p}stopped before its command started (still booting); last console lines:"; tail -n 15 "$d/console.log" >&2
    fi
  fi
  [ "${RC[n]}" = stopped ] || [ "$final" != 0 ] || final=${RC[n]}
done
exit "$final"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/pkg/vm-root.sh DIR
#
# The Debian 12 system make check-install boots: debootstrap (minbase, with
# systemd, udev, DKMS, the kernel and its headers, lavapipe and the runtime
# libraries the packages need, so that apt installs them offline in the
# VM), then DIR/root.img (ext4, made with mkfs.ext4 -d, booted read-write
# under a QEMU snapshot so it never changes), DIR/vmlinuz, DIR/initrd.img.
# Cached: rebuilt only when this script changes.  The mirror is the one
# this machine's apt already uses (no host name is written here).
set -euo pipefail

dir=$1
sum=$(md5sum < "$0" | cut -c1-12)
[ -f "$dir/.stamp-$sum" ] && exit 0

# what the packages need at run time and to build the module (DKMS), what
# libhmirror-dev depends on (libvulkan-dev), and what the check uses
# (procps: pgrep, ps)
PKGS="systemd,systemd-sysv,udev,dbus,kmod,linux-image-amd64,linux-headers-amd64,
dkms,gcc,make,libc6-dev,mesa-vulkan-drivers,libvulkan1,liburing2,libnl-3-200,
libnl-genl-3-200,libdrm2,libsystemd0,libstdc++6,libvulkan-dev,procps,passwd"
PKGS=$(printf '%s' "$PKGS" | tr -d '\n ')

mirror() {
	{
		cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
			awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ {print u; exit}'
		grep -hE '^deb +[^ ]+ +bookworm +' /etc/apt/sources.list \
			/etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2; exit}' || true
	} | head -n1
}
m=$(mirror)
[ -n "$m" ] || { echo "vm-root: no bookworm apt source on this machine" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "vm-root: no debootstrap (tools/deps.sh)" >&2; exit 2; }

rm -rf "$dir"
mkdir -p "$dir"
root=$dir/root
echo "vm-root: debootstrap bookworm into $root (once; a few minutes)" >&2
debootstrap --variant=minbase --include="$PKGS" bookworm "$root" "$m" >"$dir/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$dir/debootstrap.log" >&2; exit 1; }

# the guest: its disk is /dev/vda, no network, no getty on the console;
# hmirror-vmcheck.service runs the check from the control share and
# powers off
echo hmirror-vm > "$root/etc/hostname"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' > "$root/etc/fstab"
: > "$root/etc/machine-id"
chroot "$root" systemctl mask serial-getty@ttyS0.service getty@tty1.service \
	systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer \
	e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
cat > "$root/usr/local/sbin/hmirror-vmcheck" <<'BOOT'
#!/bin/sh
# the control share holds guest.sh (the check) and receives out.log, rc
modprobe 9pnet_virtio
mkdir -p /ctl
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 hmctl /ctl; then
	sh /ctl/guest.sh >/ctl/out.log 2>&1 </dev/null
	echo $? >/ctl/rc.tmp
	journalctl -b --no-pager >/ctl/journal.log 2>&1
	dmesg >/ctl/dmesg
	mv /ctl/rc.tmp /ctl/rc
	sync
	umount /ctl
fi
systemctl poweroff --force --force
BOOT
chmod 755 "$root/usr/local/sbin/hmirror-vmcheck"
cat > "$root/etc/systemd/system/hmirror-vmcheck.service" <<'UNIT'
[Unit]
Description=hmirror check-install (runs /ctl/guest.sh, then powers off)
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/hmirror-vmcheck
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -sf ../hmirror-vmcheck.service "$root/etc/systemd/system/multi-user.target.wants/"
chroot "$root" apt-get clean

cp "$root"/boot/vmlinuz-* "$dir/vmlinuz"
cp "$root"/boot/initrd.img-* "$dir/initrd.img"
mb=$(du -sm "$root" | cut -f1)
rm -f "$dir/root.img"
mkfs.ext4 -q -L hmroot -d "$root" "$dir/root.img" "$((mb + 1536))M"
rm -rf "$root"
touch "$dir/.stamp-$sum"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The check of make check-install, run as root by systemd inside the VM
# (tools/pkg/check-install.sh), in /ctl with the packages in /ctl/debs.
# One TAP-like line per check; the host counts them.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
kver=$(uname -r)
log=/ctl/guest-detail.log
: > $log
ok() { echo "ok - $1"; }
nok() { echo "not ok - $1${2:+ # $2}"; }
check() {	# check NAME WHY COMMAND...: ok if COMMAND succeeds
	local name=$1 why=$2
	shift 2
	if "$@" >>$log 2>&1; then ok "$name"; else nok "$name" "$why"; fi
}

# Debian's own daily jobs write while the check runs when it crosses
# their hour (dpkg-db-backup.timer left /var/backups/dpkg.status.0 and
# four more at midnight): stopped first, and their trees not compared
systemctl stop dpkg-db-backup.timer apt-daily.timer apt-daily-upgrade.timer \
	logrotate.timer man-db.timer >>$log 2>&1 || true

# every file outside the volatile trees, before and after
files() {
	find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp \
		-o -path /ctl -o -path /var/log -o -path /var/cache -o -path /var/lib/apt \
		-o -path /var/lib/dpkg -o -path /var/lib/systemd -o -path /var/tmp \
		-o -path /home -o -path /root -o -path /var/lib/dhcp -o -path /var/backups \) \
		-prune -o -print | sort
}
files > /tmp/files.before

t0=$(date +%s)
if apt-get install -y /ctl/debs/*.deb >>$log 2>&1; then
	ok "apt.install ($(( $(date +%s) - t0 ))s, DKMS build included)"
else
	tail -n 30 $log | sed 's/^/# /'
	# DKMS keeps the compiler's output in its own log: show its errors
	for f in /var/lib/dkms/hmirror/*/build/make.log; do
		[ -f "$f" ] || continue
		echo "# $f:"
		grep -E 'error|undefined|ERROR' "$f" | head -n 20 | sed 's/^/# /'
	done
	nok apt.install "apt-get install failed"
	exit 1
fi

# --- the module -------------------------------------------------------------
check dkms.built_for_booted_kernel "dkms status has no installed hmirror for $kver" \
	sh -c "dkms status -m hmirror -k $kver | grep -q ': installed'"
check dkms.module_file "no hmirror.ko under /lib/modules/$kver/updates" \
	sh -c "ls /lib/modules/$kver/updates/dkms/hmirror.ko*"
check module.modprobe "modprobe hmirror failed" modprobe hmirror
udevadm settle
dev=$(stat -c '%G %a %F' /dev/hmirror 2>/dev/null)
if [ "$dev" = "hmirror 660 character special file" ]; then
	ok "module.device_group_mode"
else
	nok module.device_group_mode "/dev/hmirror is '${dev:-missing}', want group hmirror, mode 660"
fi
check module.loaded_at_boot "no modules-load.d entry for hmirror" \
	grep -qx hmirror /usr/lib/modules-load.d/hmirror.conf

# --- the daemon: socket-activated ------------------------------------------
check daemon.socket_listening "hmirrord.socket is not listening" \
	systemctl is-active --quiet hmirrord.socket
sock=$(stat -c '%G %a %F' /run/hmirror/hmirrord.sock 2>/dev/null)
if [ "$sock" = "hmirror 660 socket" ]; then
	ok daemon.socket_group_mode
else
	nok daemon.socket_group_mode "/run/hmirror/hmirrord.sock is '${sock:-missing}'"
fi
if systemctl is-active --quiet hmirrord.service; then
	nok daemon.not_started_before_a_client "hmirrord runs before anyone connected"
else
	ok daemon.not_started_before_a_client
fi

check user.in_group "useradd -G hmirror failed (no group hmirror?)" useradd -m -G hmirror emu
useradd -m stranger
as() { local u=$1; shift; runuser -u "$u" -- "$@"; }
if as emu hmirrorctl status >/tmp/status 2>&1 && systemctl is-active --quiet hmirrord.service; then
	ok daemon.first_connection_starts_it
else
	sed 's/^/# /' /tmp/status
	systemctl status --no-pager hmirrord.service 2>&1 | tail -n 15 | sed 's/^/# /'
	nok daemon.first_connection_starts_it "hmirrorctl status as a member of group hmirror failed"
fi
if journalctl -b -u hmirrord.service | grep -q 'no "hmirror" netlink family'; then
	journalctl -b -u hmirrord.service | grep 'netlink' | sed 's/^/# /'
	nok daemon.subscribed_to_module_events "hmirrord could not join the module's events"
else
	ok daemon.subscribed_to_module_events
fi
check daemon.runs_as_its_user "hmirrord does not run as user hmirrord" \
	sh -c '[ "$(ps -o user= -C hmirrord)" = hmirrord ]'
# the socket's mode keeps everyone else out (and the daemon is up: the
# refusal is the socket's, not an absent daemon's)
as stranger hmirrorctl status >/tmp/stranger 2>&1
src=$?
if [ $src != 0 ] && grep -q 'Permission denied' /tmp/stranger &&
   systemctl is-active --quiet hmirrord.service; then
	ok daemon.refuses_non_members
else
	sed 's/^/# /' /tmp/stranger
	nok daemon.refuses_non_members "a user outside group hmirror: exit $src"
fi

# --- the demo as an unprivileged member of the group, and top watching it ---
# top first, connected (its header is out) before the demo starts, so
# that its samples cover the demo's dispatches
as emu hmirrorctl top -d 1 -n 120 >/tmp/top.out 2>&1 &
top=$!
for i in $(seq 100); do grep -q '^#' /tmp/top.out && break; sleep 0.2; done
as emu hmirror-demo --backend kmod --size 2 --rays 64 --dispatches 12 --mods 16 \
	>/tmp/demo.out 2>/tmp/demo.err &
demo=$!
wait $demo
drc=$?
kill $top 2>/dev/null; wait $top 2>/dev/null
last=$(tail -n 1 /tmp/demo.out)
echo "# $last"
case "$last" in
demo:*mismatches=0\ *) [ $drc = 0 ] && ok demo.mismatches_0 || nok demo.mismatches_0 "exit $drc" ;;
*) tail -n 10 /tmp/demo.err | sed 's/^/# /'; nok demo.mismatches_0 "exit $drc: $last" ;;
esac
# a sample line: time, clients, dispatches/s, ...
if awk '$1 ~ /^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]$/ && $2 + 0 >= 1 && $3 + 0 > 0 { found = 1 }
	END { exit !found }' /tmp/top.out; then
	ok hmirrorctl.top_shows_the_client
else
	sed 's/^/# /' /tmp/top.out
	nok hmirrorctl.top_shows_the_client "no line with a client dispatching"
fi

# --- stop: nothing left behind ---------------------------------------------
systemctl stop hmirrord.socket hmirrord.service
sleep 1
left=
pgrep -x hmirrord >/dev/null && left="$left process"
[ -e /run/hmirror/hmirrord.sock ] && left="$left socket"
ls /dev/shm | grep -q . && left="$left /dev/shm:$(ls /dev/shm | tr '\n' ' ')"
rmmod hmirror 2>>$log || left="$left module-references"
[ -z "$left" ] && ok daemon.stop_leaves_nothing || nok daemon.stop_leaves_nothing "left:$left"

# --- purge: every file goes ---------------------------------------------------
userdel -r emu 2>/dev/null; userdel -r stranger 2>/dev/null
if apt-get purge -y hmirrord hmirror-dkms libhmirror-dev libhmirror0 >>$log 2>&1; then
	ok apt.purge
else
	nok apt.purge "apt-get purge failed"
fi
files > /tmp/files.after
# (the backups useradd and systemd-sysusers make of the user database
# are not the packages' files)
extra=$(comm -13 /tmp/files.before /tmp/files.after |
	grep -vE '^/etc/(passwd|group|shadow|gshadow|subuid|subgid)-$' || true)
if [ -z "$extra" ]; then
	ok apt.purge_removes_every_file
else
	printf '%s\n' "$extra" | head -n 20 | sed 's/^/# left: /'
	nok apt.purge_removes_every_file "$(printf '%s\n' "$extra" | wc -l) paths left"
fi
exit 0
